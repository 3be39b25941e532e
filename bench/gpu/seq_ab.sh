#!/usr/bin/env bash
# Runs on the GPU machine with .carry2/new.xz: q8 prefill at 8k (with its per-stage profile and
# replay estimate) on one build with BARO_SEQ_UNROLL at each of SEQS (default "8 32 64"), one
# after another in one call. Flat files under $OUT.
set -u
cd "$(dirname "$0")/../.."
out=${OUT:-bench/results}
mkdir -p "$out"
t0=$(date +%s)
bin=$(mktemp -d)
xz -dc .carry2/new.xz > "$bin/baro_gpu" && chmod +x "$bin/baro_gpu" || exit 2
for n in prefill_speed baro-synth-pack; do ln -sf baro_gpu "$bin/$n"; done
export BARO_CACHE_DIR=/tmp/baro_cache
pack=/tmp/baro_pack/qwen35moe_real_community.gguf
mkdir -p /tmp/baro_pack
[ -f "$pack" ] || "$bin/baro-synth-pack" --out "$pack" --config real --mix community > /dev/null 2>&1
{ nvidia-smi --query-gpu=name,driver_version --format=csv; cat .carry2/new.commit; } > "$out/env.txt" 2>&1
for u in ${SEQS:-8 32 64}; do
  BARO_SEQ_UNROLL=$u timeout 100 "$bin/prefill_speed" --target cuda --model "$pack" --precision q8 --lengths ${LENGTHS:-8192} > "$out/seq${u}.log" 2>&1
  echo "seq unroll $u exit $? ($(( $(date +%s) - t0 )) s)"
done
for u in ${SEQS:-8 32 64}; do echo "== seq $u"; grep -E "^\| [0-9]|profile at" "$out/seq${u}.log"; done
