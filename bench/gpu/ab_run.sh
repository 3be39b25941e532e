#!/usr/bin/env bash
# Runs on the GPU machine: profile_run.sh for two builds in one call, so that a change is
# measured against its baseline on the same machine (timings only compare within one device).
# Carry .carry2/{old,new}.xz (xz of the stripped baro_gpu, ~20 MB each, so both fit a call's
# 64 MiB) and .carry2/{old,new}.commit. STEPS_OLD / STEPS_NEW pick profile_run.sh's steps for
# each (default "decode" and "decode ncu_kernels matvec gate_tiny"); SIDES the order (default
# "old new"). Results land in
# $OUT/profile_{old,new}.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-bench/results}
mkdir -p .carry "$out"
for side in ${SIDES:-old new}; do
  [ -f ".carry2/$side.xz" ] || { echo "ab_run.sh: .carry2/$side.xz missing" >&2; continue; }
  xz -dc ".carry2/$side.xz" | gzip -1 > .carry/baro_gpu.gz
  cp ".carry2/$side.commit" .carry/COMMIT 2>/dev/null || echo unknown > .carry/COMMIT
  if [ "$side" = old ]; then steps=${STEPS_OLD:-decode}; else steps=${STEPS_NEW:-"decode ncu_kernels matvec gate_tiny"}; fi
  echo "=== $side ($(cat .carry/COMMIT)): $steps"
  STEPS="$steps" OUT="$out" bash bench/gpu/profile_run.sh
  mv "$out/profile_run.tgz" "$out/profile_$side.tgz"
done
