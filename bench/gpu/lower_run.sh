#!/usr/bin/env bash
# Runs on the GPU machine with .carry2/{old,new}.{xz,commit}: q8 prefill at 1k and 8k and q8
# decode on both builds in one call, the new build's identity gates, then ncu's detail
# sections (with source counters) for one late attention launch of the new build's 8k prefill
# (DETAIL, default attention) and its per-kernel decode table. Results under $OUT.
set -u
cd "$(dirname "$0")/../.."
out=${OUT:-bench/results}
mkdir -p "$out" .carry
SIDES="old new" STEP_LIMIT=150 PREFILL_LENGTHS="1024,8192" STEPS_OLD="prefill_q8 decode_q8" \
  STEPS_NEW="prefill_q8 decode_q8 gate_synth gate_tiny" OUT="$out" bash bench/gpu/ab_run.sh > "$out/ab.log" 2>&1
echo "ab_run exit $?"
PARTS="rows_detail decode_q8" DETAIL=${DETAIL:-regex:attention} DETAIL_LENGTH=8192 DETAIL_SKIP=${DETAIL_SKIP:-150} DETAIL_COUNT=${DETAIL_COUNT:-1} \
  DETAIL_SECTIONS="--section SourceCounters" PART_LIMIT=150 OUT="$out" bash bench/gpu/ncu_where.sh > "$out/where_run.log" 2>&1
echo "ncu_where exit $?"
grep -h "tok/s\|PASS\|FAIL\|digest" "$out/ab.log" | head -40
