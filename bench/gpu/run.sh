#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root: unpacks the binaries that build.sh
# left in .carry/, runs the conformance suite (host JIT vs CUDA, byte for byte) and then the
# matvec bandwidth benchmark, and writes every output to $OUT (default bench/results).
# Exits nonzero if either binary fails; both always run.
set -uo pipefail
cd "$(dirname "$0")/../.."
carry=.carry
out=${OUT:-bench/results}
target=${BARO_TARGET:-cuda}
mkdir -p "$out"
bin=$(mktemp -d)
for b in conformance matvec_bw; do
  gunzip -c "$carry/$b.gz" > "$bin/$b" && chmod +x "$bin/$b" || { echo "run.sh: $carry/$b.gz missing: run bench/gpu/build.sh first" >&2; exit 2; }
done
export BARO_COMMIT=${BARO_COMMIT:-$(cat "$carry/COMMIT" 2>/dev/null || echo unknown)}
# BARO_DUMP=dir (opt-in) writes every compile stage of every kernel there.
export BARO_CACHE_DIR=${BARO_CACHE_DIR:-$bin/cache}
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv 2>&1 || true; } > "$out/nvidia_smi.txt"

"$bin/conformance" --target "$target" --out "$out/conformance_$target.md" 2>&1 | tee "$out/conformance_$target.log"
rc1=${PIPESTATUS[0]}
"$bin/matvec_bw" --target "$target" --out "$out/matvec_bw_$target.md" 2>&1 | tee "$out/matvec_bw_$target.log"
rc2=${PIPESTATUS[0]}
echo "run.sh: conformance exit $rc1, matvec_bw exit $rc2; outputs in $out"
[ "$rc1" -eq 0 ] && [ "$rc2" -eq 0 ]
