#!/usr/bin/env bash
# Runs on the GPU machine with .carry2/old.xz (+ old.commit; SIDE=NAME takes the build
# .carry2/NAME.xz or NAME.patch.zst, bench/gpu/pack_side.sh): q8 decode and ncu's per-kernel
# table of one decode token for each setting of the GPU lowering's code-shaping knobs
# (`CompileOptions`: BARO_SEQ_UNROLL, BARO_LANE_UNROLL, BARO_LOOP_VERSIONING; none changes a
# bit of output, only the code that computes it), one build, one call. VARIANTS is a list of
# settings, each a comma-separated list of VAR=VALUE ("default" for none); the default
# compares the sequential-loop unroll of 8 (the default) with 32 and 64. Any BARO_* variable
# works (e.g. BARO_GRAPH_ORDER=data; use TABLE=0 there: ncu runs kernels one at a time).
# GATE=1 also runs the tiny identity gate under each variant (its digest must not move).
# Files under $OUT: env.txt, decode.log (every variant, in order), table_<n>.log (variant
# n's ncu summary), gate_<n>.log, times.txt.
set -u
cd "$(dirname "$0")/../.."
. bench/gpu/common.sh
prepare_side "${SIDE:-old}"
export BARO_COMMIT=$(cat ".carry2/${SIDE:-old}.commit")
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; echo "commit $BARO_COMMIT"; date -u; } > "$out/env.txt" 2>&1
n=0
for v in ${VARIANTS:-default BARO_SEQ_UNROLL=32 BARO_SEQ_UNROLL=64}; do
  n=$((n + 1))
  settings=()
  [ "$v" = default ] || IFS=, read -r -a settings <<< "$v"
  echo "== variant $n: $v" >> "$out/decode.log"
  if [ "${GATE:-0}" != 0 ]; then
    env "${settings[@]}" timeout 120 "$run_dir/identity_gate" --target cuda > "$out/gate_$n.log" 2>&1
    stamp "tiny gate $v exit $?"
  fi
  env "${settings[@]}" timeout 120 "$run_dir/decode_bw" --target cuda --model "$pack" --tokens 64 --warmup 4 --precision q8 >> "$out/decode.log" 2>&1
  stamp "decode $v exit $?"
  if [ "${TABLE:-1}" != 0 ]; then
    env "${settings[@]}" timeout 100 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --print-summary per-kernel \
      "$run_dir/decode_bw" --target cuda --model "$pack" --tokens 1 --warmup 1 --precision q8 --copy-mib 64 --copy-iters 2 --pinned-mib 16 > "$out/table_$n.log" 2>&1
    stamp "table $v exit $?"
  fi
done
grep -E "^== |^tok/s|ids hash|launch graphs on" "$out/decode.log"
[ "${GATE:-0}" = 0 ] || grep -HE "PASS|FAIL|digest" "$out"/gate_*.log | tail -n 12
