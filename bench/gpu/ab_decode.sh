#!/usr/bin/env bash
# Runs on the GPU machine with .carry2/old.xz and the other builds named in BUILDS (default
# "old new"; each .carry2/NAME.xz or .carry2/NAME.patch.zst, with NAME.commit): a decode A/B
# in one call: the tiny identity gate on every build but old (GATE=0 skips it), q8 decode of
# each build twice, interleaved (64 tokens each, so run-to-run spread shows; SIDES="old new"
# picks the runs), q8 prefill at LENGTHS (default 8192; "none" skips it) of each build, then
# ncu's per-kernel table of one decode token of each build (TABLE=0 skips it). Files under
# $OUT: env.txt, gate_NAME.log, decode.log, prefill_NAME.log, table_NAME.log, times.txt.
set -u
cd "$(dirname "$0")/../.."
. bench/gpu/common.sh
builds=${BUILDS:-old new}
unpack_pair
ensure_pack "$bin/old"
stamp "pack ready"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; for b in $builds; do echo "$b $(cat .carry2/$b.commit)"; done; date -u; } > "$out/env.txt" 2>&1
if [ "${GATE:-1}" != 0 ]; then
  for side in $builds; do
    [ "$side" = old ] && continue
    timeout 120 "$bin/$side/identity_gate" --target cuda > "$out/gate_$side.log" 2>&1; stamp "tiny gate $side exit $?"
  done
fi
for side in ${SIDES:-$builds $builds}; do
  echo "== $side ($(cat .carry2/$side.commit))" >> "$out/decode.log"
  BARO_COMMIT=$(cat .carry2/$side.commit) timeout 100 "$bin/$side/decode_bw" --target cuda --model "$pack" --tokens 64 --warmup 4 --precision q8 >> "$out/decode.log" 2>&1
  stamp "decode $side exit $?"
done
for side in $([ "${LENGTHS:-}" = none ] || echo $builds); do
  BARO_COMMIT=$(cat .carry2/$side.commit) timeout 150 "$bin/$side/prefill_speed" --target cuda --model "$pack" --precision q8 --lengths "${LENGTHS:-8192}" > "$out/prefill_$side.log" 2>&1
  stamp "prefill $side exit $?"
done
if [ "${TABLE:-1}" != 0 ]; then
  for side in $builds; do
    timeout 100 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --print-summary per-kernel \
      "$bin/$side/decode_bw" --target cuda --model "$pack" --tokens 1 --warmup 1 --precision q8 --copy-mib 64 --copy-iters 2 --pinned-mib 16 > "$out/table_$side.log" 2>&1
    stamp "table $side exit $?"
  done
fi
for side in $builds; do grep -E "PASS|FAIL|digest" "$out/gate_$side.log" 2>/dev/null | tail -3; done
grep -E "^== |^tok/s" "$out/decode.log"
for side in $([ "${LENGTHS:-}" = none ] || echo $builds); do echo "== prefill $side"; grep -E "^\| [0-9]|profile at" "$out/prefill_$side.log"; done
