#!/usr/bin/env bash
# Runs on the GPU machine with .carry/baro_gpu.gz (bench/gpu/build.sh): one build's numbers in
# one call, for the closing notes of issues 12-14 — decode (q8 and f32, launch graphs on),
# q8 prefill at LENGTHS (default 1024,8192,32768) with its per-stage profile, then ncu on
# decode's kernels: the per-kernel table over one token (DECODE_TABLE=0 skips it) and the
# per-instruction stall samples of the kernels matching SOURCE (a regex; "none" skips) as
# CSV, gzipped. At most 8 files under $OUT: env.txt, decode_q8.log, decode_f32.log,
# prefill.log, decode_table.log, source.csv.gz, source_summary.log, times.txt.
set -u
cd "$(dirname "$0")/../.."
. bench/gpu/common.sh
unpack_one
export BARO_COMMIT=${BARO_COMMIT:-$(cat .carry/COMMIT 2>/dev/null || echo unknown)}
ensure_pack "$bin"
stamp "pack ready"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv; echo "commit $BARO_COMMIT"; date -u; } > "$out/env.txt" 2>&1
dec() { timeout 120 "$bin/decode_bw" --target cuda --model "$pack" --tokens 64 --warmup 4 "$@"; }
dec --precision q8 > "$out/decode_q8.log" 2>&1; stamp "decode q8 exit $?"
dec --precision f32 > "$out/decode_f32.log" 2>&1; stamp "decode f32 exit $?"
timeout 200 "$bin/prefill_speed" --target cuda --model "$pack" --precision q8 --lengths "${LENGTHS:-1024,8192,32768}" > "$out/prefill.log" 2>&1
stamp "prefill exit $?"
if [ "${DECODE_TABLE:-1}" != 0 ]; then
  # Tokens 0 and 1 (warm-up 1), so the table's launches are one token's kernels once each.
  timeout 120 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --print-summary per-kernel \
    "$bin/decode_bw" --target cuda --model "$pack" --tokens 1 --warmup 1 --precision q8 --copy-mib 64 --copy-iters 2 --pinned-mib 16 > "$out/decode_table.log" 2>&1
  stamp "decode table exit $?"
fi
src=${SOURCE:-regex:^(gdn_step_ba|router_topk_gate|moe_combine_add_rmsnorm_q8|matvec_q5_k_q8|matvec_q4_k_q8)$}
if [ "$src" != none ]; then
  rep=/tmp/source_rep
  timeout 150 ncu --clock-control none -k "$src" --launch-skip "${SOURCE_SKIP:-40}" -c "${SOURCE_COUNT:-5}" \
    --section SourceCounters --section WarpStateStats --section LaunchStats --import-source no -f -o "$rep" \
    "$bin/decode_bw" --target cuda --model "$pack" --tokens 2 --warmup 0 --precision q8 --copy-mib 64 --copy-iters 2 --pinned-mib 16 > "$out/source_summary.log" 2>&1
  stamp "source capture exit $?"
  ncu -i "$rep.ncu-rep" --page details --section WarpStateStats --section SourceCounters --section LaunchStats >> "$out/source_summary.log" 2>&1
  ncu -i "$rep.ncu-rep" --page source --csv --print-source sass 2>&1 | gzip -9 > "$out/source.csv.gz"
  stamp "source page exit $?"
fi
for f in decode_q8 decode_f32; do echo "== $f"; grep -E "^tok/s|latency ms" "$out/$f.log"; done
grep -E "^\| [0-9]|profile at|tok/s" "$out/prefill.log" | head -30
