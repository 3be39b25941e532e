#!/usr/bin/env bash
# Runs on the GPU machine with .carry2/new.xz (xz of the stripped baro_gpu, see ab_run.sh):
# decode on the full-size pack for each code-shaping variant of the GPU lowering
# (BARO_LANE_UNROLL, BARO_LOOP_VERSIONING; neither changes a bit of output), with ncu's
# per-kernel GPU time over NCU_TOKENS (default 3) tokens and the registers / spills ptxas
# reports for the decode kernels' PTX (BARO_DUMP of the variant's compile).
#   VARIANTS   "unroll:versioning ..." (default "8:on 4:on 2:on 1:on")
# Outputs to $OUT (default bench/results): decode_sweep.txt, per variant decode_sweep_U_V.md and
# ncu_sweep_U_V.log (tabulate with bench/gpu/ncu_table.py).
set -uo pipefail
cd "$(dirname "$0")/../.."
dest=${OUT:-bench/results}
mkdir -p "$dest"
bin=$(mktemp -d)
xz -dc .carry2/new.xz > "$bin/baro_gpu" && chmod +x "$bin/baro_gpu" || { echo "decode_sweep.sh: .carry2/new.xz missing" >&2; exit 2; }
for n in decode_bw baro-synth-pack; do ln -sf baro_gpu "$bin/$n"; done
export BARO_COMMIT=${BARO_COMMIT:-$(cat .carry2/new.commit 2>/dev/null || echo unknown)}
pack=${BARO_PACK:-/tmp/baro_pack/qwen35moe_real_community.gguf}
[ -f "$pack" ] || { mkdir -p "$(dirname "$pack")" && "$bin/baro-synth-pack" --out "$pack" --config real --mix community > /dev/null; } || exit 2
log=$dest/decode_sweep.txt
echo "decode sweep, commit $BARO_COMMIT, $(date -u +%FT%TZ), $(nvidia-smi --query-gpu=name --format=csv,noheader)" > "$log"
small=(--copy-mib 64 --copy-iters 2 --pinned-mib 16)
for v in ${VARIANTS:-8:on 4:on 2:on 1:on}; do
  u=${v%%:*} ver=${v##*:}
  dump=/tmp/sweep_dump_${u}_$ver && rm -rf "$dump" && mkdir -p "$dump"
  export BARO_LANE_UNROLL=$u BARO_LOOP_VERSIONING=$ver BARO_CACHE_DIR=/tmp/sweep_cache_${u}_$ver
  d=$(BARO_DUMP=$dump timeout 150 "$bin/decode_bw" --target cuda --model "$pack" --tokens 32 --out "$dest/decode_sweep_${u}_$ver.md" 2>&1 | grep -E '^tok/s|ids hash')
  timeout 120 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --print-summary per-kernel \
    "$bin/decode_bw" --target cuda --model "$pack" --tokens "${NCU_TOKENS:-3}" --warmup 0 "${small[@]}" > "$dest/ncu_sweep_${u}_$ver.log" 2>&1
  regs=""
  for f in "$dump"/*.sm_90.ptx; do
    [ -f "$f" ] || continue
    k=$(basename "$f" .sm_90.ptx)
    case $k in *_rows|embed_*) continue ;; esac
    r=$(ptxas -arch=sm_90 -v -o /dev/null "$f" 2>&1 | sed -n 's/.*Used \([0-9]*\) registers.*/\1/p' | head -1)
    regs="$regs $k ${r}r;"
  done
  { echo "== unroll $u, versioning $ver"; echo "decode: $d"; echo "registers:$regs"; } | tee -a "$log"
done
