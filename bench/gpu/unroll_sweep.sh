#!/usr/bin/env bash
# Runs on the GPU machine with .carry/baro_gpu.gz: prefill 1024 (no profile) and decode on the
# full-size pack for each code-shaping variant of the GPU lowering (BARO_LANE_UNROLL,
# BARO_LOOP_VERSIONING; neither changes a bit of output), and each variant's registers and
# spills of the expert matvecs (ptxas -v on the PTX the run compiled, BARO_DUMP).
#   VARIANTS   "unroll:versioning ..." (default "8:on 8:off 4:on 2:on 1:on 1:off")
# Outputs to $OUT (default bench/results): unroll_sweep.txt, and per variant its .md files.
set -uo pipefail
cd "$(dirname "$0")/../.."
dest=${OUT:-bench/results}
mkdir -p "$dest"
bin=$(mktemp -d)
gunzip -c .carry/baro_gpu.gz > "$bin/baro_gpu" && chmod +x "$bin/baro_gpu" || { echo "unroll_sweep.sh: .carry/baro_gpu.gz missing: run bench/gpu/build.sh first" >&2; exit 2; }
for n in prefill_speed decode_bw baro-synth-pack; do ln -sf baro_gpu "$bin/$n"; done
export BARO_COMMIT=${BARO_COMMIT:-$(cat .carry/COMMIT 2>/dev/null || echo unknown)}
pack=${BARO_PACK:-/tmp/baro_pack/qwen35moe_real_community.gguf}
[ -f "$pack" ] || { mkdir -p "$(dirname "$pack")" && "$bin/baro-synth-pack" --out "$pack" --config real --mix community > /dev/null; } || exit 2
log=$dest/unroll_sweep.txt
echo "unroll sweep, commit $BARO_COMMIT, $(date -u +%FT%TZ)" > "$log"
for v in ${VARIANTS:-8:on 8:off 4:on 2:on 1:on 1:off}; do
  u=${v%%:*} ver=${v##*:}
  dump=/tmp/sweep_dump_${u}_$ver && rm -rf "$dump" && mkdir -p "$dump"
  export BARO_LANE_UNROLL=$u BARO_LOOP_VERSIONING=$ver BARO_DUMP=$dump BARO_CACHE=off
  p=$(timeout 150 "$bin/prefill_speed" --target cuda --model "$pack" --lengths 1024 --replay-tokens 4 --no-profile --out "$dest/sweep_prefill_${u}_$ver.md" 2>&1 | grep -E '^\| 1024 ')
  unset BARO_DUMP
  d=$(BARO_CACHE=off timeout 100 "$bin/decode_bw" --target cuda --model "$pack" --tokens 16 --out "$dest/sweep_decode_${u}_$ver.md" 2>&1 | grep -E '^tok/s|^logits|ids hash')
  regs=""
  for k in matvec_q4_k matvec_q4_k_rows matvec_q5_k_rows matvec_q8_0_rows; do
    f=$(ls "$dump"/$k.sm_90.ptx 2>/dev/null | head -1)
    [ -n "$f" ] || continue
    r=$(ptxas -arch=sm_90 -v -o /dev/null "$f" 2>&1 | sed -n 's/.*Used \([0-9]*\) registers.*/\1/p' | head -1)
    sp=$(ptxas -arch=sm_90 -v -o /dev/null "$f" 2>&1 | sed -n 's/.*, \([0-9]*\) bytes spill stores.*/\1/p' | head -1)
    regs="$regs $k ${r}r/${sp}sp;"
  done
  { echo "== unroll $u, versioning $ver"; echo "prefill: $p"; echo "decode: $d"; echo "registers:$regs"; } | tee -a "$log"
done
