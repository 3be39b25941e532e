#!/usr/bin/env bash
# Runs on the GPU machine with .carry2/{old,new}.{xz,commit}: q8 prefill at 1k on both (the
# scan's beta/alpha change), the new build's q8 decode and identity gates, then ncu's
# warp-state, memory and instruction sections for late attention_rows launches of q8 prefill
# at 8k on the new build (where its time goes, for the next change). Results under $OUT.
set -u
cd "$(dirname "$0")/../.."
out=${OUT:-bench/results}
t0=$(date +%s)
SIDES="old new" STEP_LIMIT=150 STEPS_OLD="prefill_q8" STEPS_NEW="prefill_q8 decode_q8 gate_synth gate_tiny" OUT="$out" bash bench/gpu/ab_run.sh
echo "elapsed $(( $(date +%s) - t0 )) s"
PARTS=rows_detail DETAIL="regex:attention_rows" DETAIL_SKIP=${ATTN_SKIP:-140} DETAIL_COUNT=3 PART_LIMIT=150 OUT="$out" \
  DETAIL_LENGTH=8192 bash bench/gpu/ncu_where.sh
echo "elapsed $(( $(date +%s) - t0 )) s"
