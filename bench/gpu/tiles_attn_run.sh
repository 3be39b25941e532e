#!/usr/bin/env bash
# Runs on the GPU machine with .carry2/{old,new}.{xz,commit} (as ab_run.sh): the q8 tile kernels
# (dot4 against the matrix step, BARO_Q8_TILES) and the attention tiles at 1k and 8k, in one
# call. Everything lands under $OUT: profile_{old,new}.tgz (q8 prefill 1k; the new build's
# synthetic identity gate), mma/ (the new build with BARO_Q8_TILES=mma: q8 prefill 1k and the
# gate), long_{old,new}/ (q8 prefill 8k), where/attn_8k.log (ncu per attention_rows launch).
set -u
cd "$(dirname "$0")/../.."
out=${OUT:-bench/results}
t0=$(date +%s)
SIDES="old new" STEP_LIMIT=150 STEPS_OLD="prefill_q8" STEPS_NEW="prefill_q8 gate_synth" OUT="$out" bash bench/gpu/ab_run.sh
echo "elapsed $(( $(date +%s) - t0 )) s"
# .carry now holds the new build.
BARO_Q8_TILES=mma STEPS="prefill_q8 gate_synth" STEP_LIMIT=150 OUT="$out/mma" bash bench/gpu/profile_run.sh
PREFILL_LENGTHS=8192 STEPS=prefill_q8 STEP_LIMIT=150 OUT="$out/long_new" bash bench/gpu/profile_run.sh
echo "elapsed $(( $(date +%s) - t0 )) s"
PARTS=attn_8k PART_LIMIT=100 OUT="$out" bash bench/gpu/ncu_where.sh
echo "elapsed $(( $(date +%s) - t0 )) s"
if [ $(( $(date +%s) - t0 )) -lt 420 ]; then
  xz -dc .carry2/old.xz | gzip -1 > .carry/baro_gpu.gz; cp .carry2/old.commit .carry/COMMIT
  PREFILL_LENGTHS=8192 STEPS=prefill_q8 STEP_LIMIT=120 OUT="$out/long_old" bash bench/gpu/profile_run.sh
fi
echo "elapsed $(( $(date +%s) - t0 )) s"
