#!/usr/bin/env bash
# Runs on the GPU machine with .carry/baro_gpu.gz (build.sh): where q8 prefill and decode spend
# their GPU time, before a change (issues 12, 13, 14). Every part writes under $OUT/where/:
#   prefill_1k.log   ncu per-kernel GPU time over the first NCU_PREFILL_LAUNCHES (default 2600)
#                    launches of q8 prefill at 1k (the warm-up chunk, then the timed chunks)
#   rows_detail.log  ncu's speed-of-light, warp-state, occupancy, instruction and memory sections
#                    for a few launches of the kernels matching DETAIL (default the 8-row q8
#                    matvecs and attention_rows), in the timed part of q8 prefill at DETAIL_LENGTH (default 1k)
#                    (DETAIL_SECTIONS adds ncu options, e.g. "--section SourceCounters")
#   attn_8k.log      ncu GPU time of every attention_rows launch of q8 prefill at 8k
#   decode_q8.log    ncu per-kernel GPU time over 3 decoded q8 tokens
# Each part runs under PART_LIMIT seconds (default 150); PARTS picks some (default all four).
set -u
cd "$(dirname "$0")/../.."
out=${OUT:-bench/results}/where
mkdir -p "$out"
bin=$(mktemp -d)
gunzip -c .carry/baro_gpu.gz > "$bin/baro_gpu" && chmod +x "$bin/baro_gpu" || exit 2
for n in prefill_speed decode_bw baro-synth-pack; do ln -sf baro_gpu "$bin/$n"; done
export BARO_CACHE_DIR=/tmp/baro_cache
pack=/tmp/baro_pack/qwen35moe_real_community.gguf
mkdir -p /tmp/baro_pack
[ -f "$pack" ] || "$bin/baro-synth-pack" --out "$pack" --config real --mix community > "$out/pack.log" 2>&1
lim=${PART_LIMIT:-150}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/nvidia_smi.txt" 2>&1
cat .carry/COMMIT > "$out/commit.txt" 2>/dev/null
ncu_t=(ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --print-summary per-kernel)
pf=("$bin/prefill_speed" --target cuda --model "$pack" --replay-tokens 1 --no-profile --precision q8)
part() { local name=$1; shift; case " ${PARTS:-prefill_1k rows_detail attn_8k decode_q8} " in *" $name "*) ;; *) return ;; esac; local t=$(date +%s); timeout "$lim" "$@" > "$out/$name.log" 2>&1; echo "$name exit $? ($(( $(date +%s) - t )) s)" | tee -a "$out/summary.txt"; }
part prefill_1k "${ncu_t[@]}" -c "${NCU_PREFILL_LAUNCHES:-2600}" "${pf[@]}" --lengths 1024
part rows_detail ncu --clock-control none --cache-control none -k "${DETAIL:-regex:rows8|attention_rows}" --launch-skip "${DETAIL_SKIP:-300}" -c "${DETAIL_COUNT:-10}" \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats --section SchedulerStats --section InstructionStats --section ComputeWorkloadAnalysis ${DETAIL_SECTIONS:-} \
  "${pf[@]}" --lengths "${DETAIL_LENGTH:-1024}"
part attn_8k ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum -k regex:attention_rows "${pf[@]}" --lengths 8192
part decode_q8 "${ncu_t[@]}" "$bin/decode_bw" --target cuda --model "$pack" --tokens 3 --warmup 0 --precision q8 --copy-mib 64 --copy-iters 2 --pinned-mib 16
