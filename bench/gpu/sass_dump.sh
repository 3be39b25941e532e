#!/usr/bin/env bash
# Runs on the GPU machine with .carry2/new.xz: compiles the engine's decode kernels afresh (an
# empty cache, BARO_DUMP on) by decoding one token of the full-size pack, then assembles the PTX
# of the kernels named in KERNELS (default the quantized `_xs` matvecs) with ptxas for sm_90 and
# writes, per kernel, ptxas's register/spill report and the SASS (cuobjdump -sass) to
# /tmp/sass/ (packed into $OUT/sass.tgz: the device tool returns few files), with a count of
# SASS instructions per opcode, to see what the hot loop issues.
set -uo pipefail
cd "$(dirname "$0")/../.."
dest=/tmp/sass
rm -rf "$dest" && mkdir -p "$dest" "${OUT:-bench/results}"
bin=$(mktemp -d)
xz -dc .carry2/new.xz > "$bin/baro_gpu" && chmod +x "$bin/baro_gpu" || { echo "sass_dump.sh: .carry2/new.xz missing" >&2; exit 2; }
ln -sf baro_gpu "$bin/decode_bw"
pack=${BARO_PACK:-/tmp/baro_pack/qwen35moe_real_community.gguf}
[ -f "$pack" ] || { echo "sass_dump.sh: $pack missing (profile_run.sh writes it)" >&2; exit 2; }
dump=$(mktemp -d)
BARO_DUMP=$dump BARO_CACHE_DIR=$(mktemp -d) timeout 200 "$bin/decode_bw" --target cuda --model "$pack" --tokens 1 --warmup 0 \
  --copy-mib 64 --copy-iters 2 --pinned-mib 16 > "$dest/decode_dump.log" 2>&1
for k in ${KERNELS:-matvec_q8_0_xs matvec_q4_k_xs matvec_q5_k_xs matvec_q6_k_xs matvec_f32}; do
  f=$dump/$k.sm_90.ptx
  [ -f "$f" ] || { echo "$k: no PTX in the dump" | tee -a "$dest/summary.txt"; continue; }
  cp "$f" "$dest/"
  ptxas -arch=sm_90 -v -o "$dump/$k.cubin" "$f" > "$dest/$k.ptxas.txt" 2>&1
  cuobjdump -sass "$dump/$k.cubin" > "$dest/$k.sass" 2>&1
  n=$(grep -cE '^\s+/\*[0-9a-f]{4,}\*/' "$dest/$k.sass")
  echo "$k: $(sed -n 's/.*\(Used [0-9]* registers[^\n]*\)/\1/p' "$dest/$k.ptxas.txt" | head -1); $n SASS instructions" | tee -a "$dest/summary.txt"
  grep -oE '^\s+/\*[0-9a-f]{4,}\*/\s+(@!?U?P[0-9T] )?[A-Z0-9_]+' "$dest/$k.sass" | awk '{print $NF}' | sed 's/\..*//' | sort | uniq -c | sort -rn | head -25 > "$dest/$k.opcodes.txt"
done
tar -czf "${OUT:-bench/results}/sass.tgz" -C /tmp sass
