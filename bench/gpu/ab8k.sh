#!/usr/bin/env bash
# Runs on the GPU machine with .carry2/{old,new}.xz: the identity gates of the new build
# (tiny fixture f32, synthetic pack q8 at its default lengths: GATE=0 skips them), q8 prefill
# at 8k (LENGTHS) with its per-stage profile on the old build, the new build, and the new
# build under each of VARIANTS (environment assignments, default "BARO_SEQ_UNROLL=16
# BARO_SEQ_UNROLL=32", "none" for none), one after another in one call; then ncu's detail sections for the
# kernels matching DETAIL (late launches: DETAIL_SKIP, DETAIL_COUNT) of the new build. At most
# 8 flat files under $OUT (what a call brings back): env.txt, gates.log, old.log, new.log,
# one per variant (at most two), detail.log, decode_detail.log (DECODE_DETAIL=none skips it).
set -u
cd "$(dirname "$0")/../.."
. bench/gpu/common.sh
unpack_pair
ensure_pack "$bin/new"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/env.txt" 2>&1
cat .carry2/old.commit .carry2/new.commit >> "$out/env.txt" 2>/dev/null
lengths=${LENGTHS:-8192}
if [ "${GATE:-1}" != 0 ]; then
  { timeout 100 "$bin/new/identity_gate" --target cuda; echo "tiny exit $?";
    timeout 200 "$bin/new/identity_gate" --target cuda --model "$pack" --precision q8; echo "pack q8 exit $?"; } > "$out/gates.log" 2>&1
  echo "gates done ($(( $(date +%s) - t0 )) s)"; grep -E "PASS|FAIL|digest|exit" "$out/gates.log" | tail -8
fi
pf() { local side=$1; shift; timeout 150 "$bin/$side/prefill_speed" --target cuda --model "$pack" --precision q8 --lengths "$lengths" "$@"; }
pf old > "$out/old.log" 2>&1; echo "old exit $? ($(( $(date +%s) - t0 )) s)"
pf new > "$out/new.log" 2>&1; echo "new exit $? ($(( $(date +%s) - t0 )) s)"
n=0
for v in ${VARIANTS:-BARO_SEQ_UNROLL=16 BARO_SEQ_UNROLL=32}; do
  [ "$v" != none ] || break
  n=$((n + 1)); [ $n -le 2 ] || break
  ( export "$v"; pf new ) > "$out/var_${v//[^A-Za-z0-9]/_}.log" 2>&1
  echo "new $v exit $? ($(( $(date +%s) - t0 )) s)"
done
if [ -n "${DETAIL:-regex:attention_(scores|pv)_rows|gdn_scan_rows}" ] && [ "${DETAIL:-x}" != none ]; then
  timeout 150 ncu --clock-control none --cache-control none -k "${DETAIL:-regex:attention_(scores|pv)_rows|gdn_scan_rows}" \
    --launch-skip "${DETAIL_SKIP:-750}" -c "${DETAIL_COUNT:-5}" \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats \
    --section SchedulerStats --section InstructionStats --section SourceCounters \
    "$bin/new/prefill_speed" --target cuda --model "$pack" --precision q8 --lengths 8192 --no-profile --replay-tokens 1 > "$out/detail.log" 2>&1
  echo "ncu detail exit $? ($(( $(date +%s) - t0 )) s)"
fi
# Decode's small kernels in detail (one launch each, past the first token): DECODE_DETAIL.
if [ "${DECODE_DETAIL:-x}" != none ]; then
  timeout 120 ncu --clock-control none -k "${DECODE_DETAIL:-regex:^(router_topk_gate|moe_combine_add_rmsnorm_q8|gdn_step_ba|matvec_q5_k_q8|matvec_q4_k_q8)$}" \
    --launch-skip "${DECODE_SKIP:-40}" -c "${DECODE_COUNT:-5}" \
    --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats --section SchedulerStats --section SourceCounters \
    "$bin/new/decode_bw" --target cuda --model "$pack" --tokens 2 --warmup 0 --precision q8 --copy-mib 64 --copy-iters 2 --pinned-mib 16 > "$out/decode_detail.log" 2>&1
  echo "ncu decode detail exit $? ($(( $(date +%s) - t0 )) s)"
fi
for f in "$out"/old.log "$out"/new.log "$out"/var_*.log; do echo "== $f"; grep -E "^\| [0-9]|profile at" "$f"; done
grep -E "^  [a-z_0-9]+ \(|Duration|Registers Per|Achieved Occupancy|Executed Ipc A" "$out/detail.log" 2>/dev/null | head -40
