#!/usr/bin/env bash
# Runs on the GPU machine with .carry2/{old,new}.{xz,commit}: lower_run.sh's A/B (q8 prefill at
# 1k and 8k and q8 decode on both builds, the new build's gates; ncu detail for three late
# attention launches at 8k, DETAIL; the new build's per-kernel decode table), the new build's
# 8k q8 prefill with BARO_LANE_UNROLL 16 and 32 (UNROLLS), then, in what is left of LIMIT
# seconds (default 560), the new build's q8 prefill at 32k. Results under $OUT.
set -u
cd "$(dirname "$0")/../.."
out=${OUT:-bench/results}
t0=$(date +%s)
DETAIL=${DETAIL:-"regex:attention_(scores|softmax|pv)_rows"} DETAIL_SKIP=${DETAIL_SKIP:-480} DETAIL_COUNT=${DETAIL_COUNT:-3} \
  OUT="$out" bash bench/gpu/lower_run.sh
echo "elapsed $(( $(date +%s) - t0 )) s"
# The new build with the lane unroll doubled and quadrupled (the P·V loop's 8 / 8 = 1 becomes
# 2 and 4; every other unrolled loop changes too): q8 prefill at 8k, for the attention stage.
for u in ${UNROLLS:-16 32}; do
  mkdir -p "$out/unroll$u"
  BARO_LANE_UNROLL=$u STEPS="prefill_q8" PREFILL_LENGTHS=8192 STEP_LIMIT=100 OUT="$out/unroll$u" bash bench/gpu/profile_run.sh > "$out/unroll$u/run.log" 2>&1
  echo "unroll $u exit $? ($(( $(date +%s) - t0 )) s)"
done
left=$(( ${LIMIT:-560} - ($(date +%s) - t0) ))
if [ "$left" -gt 90 ]; then
  mkdir -p "$out/long"
  STEPS="prefill_q8" PREFILL_LENGTHS=32768 STEP_LIMIT=$(( left - 10 )) OUT="$out/long" bash bench/gpu/profile_run.sh > "$out/long/run.log" 2>&1
  echo "32k exit $? ($(( $(date +%s) - t0 )) s)"
  tar -xzOf "$out/long/profile_run.tgz" profile_run/prefill_q8.log 2>/dev/null | grep -A3 "prompt tokens" | head -5
else
  echo "32k skipped: $left s left"
fi
