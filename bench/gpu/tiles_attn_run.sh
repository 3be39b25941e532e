#!/usr/bin/env bash
# Runs on the GPU machine with .carry2/{old,new}.{xz,commit} (as ab_run.sh). PART=a (default):
# old against new, q8 prefill at 1k and q8 decode on both, the new build's identity gates
# (synthetic pack in both precisions, tiny fixture), and q8 prefill at 8k on the new build.
# PART=b: the new build with BARO_Q8_TILES=mma (q8 prefill 1k and the synthetic gate), ncu
# per attention_rows launch at 8k, and q8 prefill at 32k. Everything lands under $OUT.
set -u
cd "$(dirname "$0")/../.."
out=${OUT:-bench/results}
t0=$(date +%s)
if [ "${PART:-a}" = a ]; then
  SIDES="old new" STEP_LIMIT=150 STEPS_OLD="prefill_q8 decode_q8" STEPS_NEW="prefill_q8 decode_q8 gate_synth gate_tiny" OUT="$out" bash bench/gpu/ab_run.sh
  echo "elapsed $(( $(date +%s) - t0 )) s"
  PREFILL_LENGTHS=8192 STEPS=prefill_q8 STEP_LIMIT=120 OUT="$out/long_new" bash bench/gpu/profile_run.sh
else
  xz -dc .carry2/new.xz | gzip -1 > .carry/baro_gpu.gz; cp .carry2/new.commit .carry/COMMIT
  BARO_Q8_TILES=mma STEPS="prefill_q8 gate_synth" STEP_LIMIT=150 OUT="$out/mma" bash bench/gpu/profile_run.sh
  echo "elapsed $(( $(date +%s) - t0 )) s"
  PARTS=attn_8k PART_LIMIT=100 OUT="$out" bash bench/gpu/ncu_where.sh
  echo "elapsed $(( $(date +%s) - t0 )) s"
  PREFILL_LENGTHS=32768 STEPS=prefill_q8 STEP_LIMIT=$(( 560 - ($(date +%s) - t0) )) OUT="$out/long32k_new" bash bench/gpu/profile_run.sh
fi
echo "elapsed $(( $(date +%s) - t0 )) s"
