#!/usr/bin/env bash
# Runs on the GPU machine with .carry2/{old,new}.xz and .carry2/{old,new}.commit (as ab_run.sh):
# prefill at 1k in both precisions on both builds, then on the new one q8 decode and the
# synthetic pack's identity gate (both precisions), and, while under LONG_BEFORE seconds
# (default 330), q8 prefill at 8k on the new build ($OUT/profile_{old,new}.tgz, $OUT/long/).
set -u
cd "$(dirname "$0")/../.."
out=${OUT:-bench/results}
t0=$(date +%s)
SIDES="old new" STEP_LIMIT=${STEP_LIMIT:-120} STEPS_OLD="prefill_q8 prefill" STEPS_NEW="prefill_q8 prefill decode_q8 gate_synth" OUT="$out" bash bench/gpu/ab_run.sh
echo "elapsed $(( $(date +%s) - t0 )) s"
if [ $(( $(date +%s) - t0 )) -lt "${LONG_BEFORE:-330}" ]; then
  mkdir -p "$out/long"
  PREFILL_LENGTHS=8192 STEPS=prefill_q8 STEP_LIMIT=$(( 540 - ($(date +%s) - t0) )) OUT="$out/long" bash bench/gpu/profile_run.sh
fi
echo "elapsed $(( $(date +%s) - t0 )) s"
