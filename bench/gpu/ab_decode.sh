#!/usr/bin/env bash
# Runs on the GPU machine with .carry2/{old,new}.xz (+ .commit): a decode A/B in one call —
# the tiny identity gate on the new build (GATE=0 skips it), q8 decode old, new, old, new
# (64 tokens each, so run-to-run spread shows; SIDES="old new" runs each once), q8 prefill at
# LENGTHS (default 8192; "none" skips it) old and new, then ncu's per-kernel table of one
# decode token of each build (TABLE=0 skips it). At most 8 files under $OUT: env.txt,
# gate.log, decode.log, prefill_old.log, prefill_new.log, table_old.log, table_new.log,
# times.txt.
set -u
cd "$(dirname "$0")/../.."
. bench/gpu/common.sh
unpack_pair
ensure_pack "$bin/new"
stamp "pack ready"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; cat .carry2/old.commit .carry2/new.commit; date -u; } > "$out/env.txt" 2>&1
if [ "${GATE:-1}" != 0 ]; then
  timeout 120 "$bin/new/identity_gate" --target cuda > "$out/gate.log" 2>&1; stamp "tiny gate exit $?"
fi
for side in ${SIDES:-old new old new}; do
  echo "== $side ($(cat .carry2/$side.commit))" >> "$out/decode.log"
  BARO_COMMIT=$(cat .carry2/$side.commit) timeout 100 "$bin/$side/decode_bw" --target cuda --model "$pack" --tokens 64 --warmup 4 --precision q8 >> "$out/decode.log" 2>&1
  stamp "decode $side exit $?"
done
for side in $([ "${LENGTHS:-}" = none ] || echo old new); do
  BARO_COMMIT=$(cat .carry2/$side.commit) timeout 150 "$bin/$side/prefill_speed" --target cuda --model "$pack" --precision q8 --lengths "${LENGTHS:-8192}" > "$out/prefill_$side.log" 2>&1
  stamp "prefill $side exit $?"
done
if [ "${TABLE:-1}" != 0 ]; then
  for side in old new; do
    timeout 100 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --print-summary per-kernel \
      "$bin/$side/decode_bw" --target cuda --model "$pack" --tokens 1 --warmup 1 --precision q8 --copy-mib 64 --copy-iters 2 --pinned-mib 16 > "$out/table_$side.log" 2>&1
    stamp "table $side exit $?"
  done
fi
grep -E "PASS|FAIL|digest" "$out/gate.log" 2>/dev/null | tail -3
grep -E "^== |^tok/s" "$out/decode.log"
for side in old new; do echo "== prefill $side"; grep -E "^\| [0-9]|profile at" "$out/prefill_$side.log"; done
