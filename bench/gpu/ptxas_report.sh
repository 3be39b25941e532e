#!/usr/bin/env bash
# Offline register and spill report for sm_90, no GPU needed: writes the PTX of KERNEL... with
# `kernel_asm`, then runs NVIDIA's ptxas on it (`ptxas -arch=sm_90 -v`). ptxas comes from the
# `nvidia-cuda-nvcc-cu12` wheel on PyPI, downloaded once into .carry/ptxas/ (ignored by git).
# MIN_CTAS=N also reports each kernel as if it asked for N workgroups per SM (`.minnctapersm N`
# edited into a copy of its PTX): the registers ptxas then allows and what spills.
#   bench/gpu/ptxas_report.sh attention_pv_rows matvec_q8_0_q8_rows8
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -gt 0 ] || { echo "usage: $0 KERNEL..." >&2; exit 2; }
# .carry/ is ignored through the (shared) exclude file, as build.sh does it.
exclude=$(git rev-parse --git-path info/exclude)
grep -qx '/.carry/' "$exclude" 2>/dev/null || echo '/.carry/' >> "$exclude"
tools=.carry/ptxas
ptxas=$tools/nvidia/cuda_nvcc/bin/ptxas
if [ ! -x "$ptxas" ]; then
  mkdir -p "$tools"
  python3 -m pip download -q --no-deps nvidia-cuda-nvcc-cu12 -d "$tools"
  (cd "$tools" && python3 -m zipfile -e nvidia_cuda_nvcc_cu12-*.whl .)
  chmod +x "$ptxas"
fi
dir=$(mktemp -d)
cargo run -q -p baro-engine --example kernel_asm -- "$dir" "$@" > /dev/null
for k in "$@"; do
  echo "$k: $("$ptxas" -arch=sm_90 -v -o /dev/null "$dir/$k.sm_90.ptx" 2>&1 | grep -oE 'Used [0-9]+ registers|[0-9]+ bytes spill (stores|loads)|[0-9]+ bytes smem' | tr '\n' ' ')"
  if [ -n "${MIN_CTAS:-}" ]; then
    sed "s/^\.maxntid \(.*\)$/.maxntid \1\n.minnctapersm $MIN_CTAS/" "$dir/$k.sm_90.ptx" > "$dir/min.ptx"
    echo "  at $MIN_CTAS workgroups per SM: $("$ptxas" -arch=sm_90 -v -o /dev/null "$dir/min.ptx" 2>&1 | grep -oE 'Used [0-9]+ registers|[0-9]+ bytes spill (stores|loads)' | tr '\n' ' ')"
  fi
done
rm -rf "$dir"
