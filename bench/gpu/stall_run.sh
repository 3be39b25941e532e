#!/usr/bin/env bash
# Runs on the GPU machine with .carry2/old.xz (+ old.commit; SIDE=NAME takes the build
# .carry2/NAME.xz or NAME.patch.zst): per-SASS-instruction warp stall
# samples of chosen decode kernels at ncu's densest sampling (`--sampling-interval 0`: one
# sample per 32 cycles per SM sub-partition), so that kernels of a few microseconds get
# thousands of samples. KERNELS is an ncu kernel-name regex; SKIP launches of them are
# skipped (warm-up), COUNT profiled. Files: summary.log (warp state, launch statistics,
# source counters), source.csv.gz (the SASS page), times.txt.
set -u
cd "$(dirname "$0")/../.."
. bench/gpu/common.sh
prepare_side "${SIDE:-old}"
rep=/tmp/stall_rep
timeout 400 ncu --clock-control none -k "regex:${KERNELS:-^(router_topk_gate|moe_combine_add_rmsnorm_q8|gdn_step_ba|matvec_q5_k_q8)\$}" \
  --launch-skip "${SKIP:-40}" -c "${COUNT:-8}" --sampling-interval 0 \
  --section SourceCounters --section WarpStateStats --section LaunchStats --section SchedulerStats --import-source no -f -o "$rep" \
  "$run_dir/decode_bw" --target cuda --model "$pack" --tokens 2 --warmup 0 --precision q8 --copy-mib 64 --copy-iters 2 --pinned-mib 16 > "$out/summary.log" 2>&1
stamp "capture exit $?"
ncu -i "$rep.ncu-rep" --page details >> "$out/summary.log" 2>&1
ncu -i "$rep.ncu-rep" --page source --csv --print-source sass 2>&1 | gzip -9 > "$out/source.csv.gz"
stamp "source page exit $?"
