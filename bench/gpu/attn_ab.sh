#!/usr/bin/env bash
# Runs on the GPU machine with .carry2/{old,new}.xz: q8 prefill at 8k (with its per-stage
# profile) on the old build, the new build, and the new build with BARO_LANE_UNROLL 16 and 32
# (UNROLLS), one after another in one call; then ncu's detail sections (source counters
# included) for three late attention launches of the new build (ATTN, DETAIL_SKIP) and its
# per-kernel q8 decode table. At most 8 flat files under $OUT (what a call brings back).
set -u
cd "$(dirname "$0")/../.."
out=${OUT:-bench/results}
mkdir -p "$out"
t0=$(date +%s)
bin=$(mktemp -d)
for side in old new; do
  mkdir -p "$bin/$side" && xz -dc ".carry2/$side.xz" > "$bin/$side/baro_gpu" && chmod +x "$bin/$side/baro_gpu" || exit 2
  for n in prefill_speed decode_bw baro-synth-pack; do ln -sf baro_gpu "$bin/$side/$n"; done
done
export BARO_CACHE_DIR=/tmp/baro_cache
pack=/tmp/baro_pack/qwen35moe_real_community.gguf
mkdir -p /tmp/baro_pack
[ -f "$pack" ] || "$bin/new/baro-synth-pack" --out "$pack" --config real --mix community > /dev/null 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/env.txt" 2>&1
cat .carry2/old.commit .carry2/new.commit >> "$out/env.txt" 2>/dev/null
pf() { local side=$1; shift; timeout 120 "$bin/$side/prefill_speed" --target cuda --model "$pack" --precision q8 "$@"; }
pf old --lengths 8192 > "$out/old_8k.log" 2>&1; echo "old 8k exit $? ($(( $(date +%s) - t0 )) s)"
pf new --lengths 8192 > "$out/new_8k.log" 2>&1; echo "new 8k exit $? ($(( $(date +%s) - t0 )) s)"
for u in ${UNROLLS:-16 32}; do
  BARO_LANE_UNROLL=$u pf new --lengths 8192 > "$out/new_u${u}_8k.log" 2>&1; echo "new unroll $u 8k exit $? ($(( $(date +%s) - t0 )) s)"
done
timeout 120 ncu --clock-control none --cache-control none -k "${ATTN:-regex:attention_(scores|softmax|pv)_rows}" --launch-skip "${DETAIL_SKIP:-480}" -c 3 \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats \
  --section SchedulerStats --section InstructionStats --section ComputeWorkloadAnalysis --section SourceCounters \
  "$bin/new/prefill_speed" --target cuda --model "$pack" --precision q8 --lengths 8192 --no-profile --replay-tokens 1 > "$out/attn_detail.log" 2>&1
echo "ncu attention exit $? ($(( $(date +%s) - t0 )) s)"
timeout 90 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --print-summary per-kernel \
  "$bin/new/decode_bw" --target cuda --model "$pack" --tokens 3 --warmup 0 --precision q8 --copy-mib 64 --copy-iters 2 --pinned-mib 16 > "$out/decode_ncu.log" 2>&1
echo "ncu decode exit $? ($(( $(date +%s) - t0 )) s)"
for f in old_8k new_8k new_u16_8k new_u32_8k; do echo "== $f"; grep -E "^\| 8192|profile at" "$out/$f.log"; done
