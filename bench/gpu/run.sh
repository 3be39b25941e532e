#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root: unpacks the binaries that build.sh
# left in .carry/, runs the conformance suite (host JIT vs CUDA, byte for byte), the matvec
# bandwidth benchmark and the decode benchmark, and writes every output to $OUT (default
# bench/results). Exits nonzero if any binary fails; all selected ones always run.
#
# BARO_BENCHES   which to run, in order (default: those of conformance, matvec_bw, decode_bw
#                whose .gz is in .carry/; a named one that is missing is an error)
# BARO_PACK      the GGUF pack decode_bw reads; unset: baro-synth-pack (if carried) writes the
#                real-shape community-mix pack (about 22.4 GB) to $BARO_PACK_DIR (default
#                /tmp/baro_pack, so a later call on the same machine reuses it) first, or
#                reuses one already there; BARO_PACK_CONFIG
#                (default real; tiny for a smoke test) picks its shapes
# DECODE_ARGS    extra decode_bw arguments (e.g. "--tokens 128 --context-tokens 4096")
set -uo pipefail
cd "$(dirname "$0")/../.."
carry=.carry
out=${OUT:-bench/results}
target=${BARO_TARGET:-cuda}
# Default: each of the three whose binary was carried (the carry limit may not fit all three).
benches=${BARO_BENCHES:-$(for b in conformance matvec_bw decode_bw; do [ -f "$carry/$b.gz" ] || [ -f "$carry/baro_gpu.gz" ] && printf '%s ' "$b"; done)}
[ -n "$benches" ] || { echo "run.sh: no $carry/{conformance,matvec_bw,decode_bw}.gz: run bench/gpu/build.sh first" >&2; exit 2; }
mkdir -p "$out"
bin=$(mktemp -d)
# `baro_gpu` (build.sh's default) is every benchmark and the pack writer, by the name it is called under.
if [ -f "$carry/baro_gpu.gz" ]; then
  gunzip -c "$carry/baro_gpu.gz" > "$bin/baro_gpu" && chmod +x "$bin/baro_gpu" || exit 2
  for n in identity_gate prefill_speed long_context decode_bw conformance matvec_bw serve_load baro-synth-pack; do ln -sf baro_gpu "$bin/$n"; done
fi
for b in $benches; do
  [ -x "$bin/$b" ] && continue
  gunzip -c "$carry/$b.gz" > "$bin/$b" && chmod +x "$bin/$b" || { echo "run.sh: $carry/$b.gz missing: run bench/gpu/build.sh first" >&2; exit 2; }
done
export BARO_COMMIT=${BARO_COMMIT:-$(cat "$carry/COMMIT" 2>/dev/null || echo unknown)}
# BARO_DUMP=dir (opt-in) writes every compile stage of every kernel there.
export BARO_CACHE_DIR=${BARO_CACHE_DIR:-$bin/cache}
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv 2>&1 || true; } > "$out/nvidia_smi.txt"

# Writes the synthetic pack when none is named; prints its path.
pack_path() {
  if [ -n "${BARO_PACK:-}" ]; then echo "$BARO_PACK"; return 0; fi
  local dir=${BARO_PACK_DIR:-${TMPDIR:-/tmp}/baro_pack} p
  p=$dir/qwen35moe_${BARO_PACK_CONFIG:-real}_community.gguf
  if [ -f "$p" ]; then echo "$p"; return 0; fi
  if [ ! -x "$bin/baro-synth-pack" ]; then
    [ -f "$carry/baro-synth-pack.gz" ] || { echo "run.sh: no BARO_PACK and no $carry/baro-synth-pack.gz (or baro_gpu.gz) to write one" >&2; return 1; }
    gunzip -c "$carry/baro-synth-pack.gz" > "$bin/baro-synth-pack" && chmod +x "$bin/baro-synth-pack" || return 1
  fi
  mkdir -p "$dir" || return 1
  "$bin/baro-synth-pack" --out "$p" --config "${BARO_PACK_CONFIG:-real}" --mix community >&2 || return 1
  echo "$p"
}

summary=""
fail=0
for b in $benches; do
  case $b in
    decode_bw)
      if pack=$(pack_path); then
        # shellcheck disable=SC2086
        "$bin/decode_bw" --target "$target" --model "$pack" ${DECODE_ARGS:-} --out "$out/decode_bw_$target.md" 2>&1 | tee "$out/decode_bw_$target.log"
        rc=${PIPESTATUS[0]}
      else
        rc=2
      fi
      ;;
    *)
      "$bin/$b" --target "$target" --out "$out/${b}_$target.md" 2>&1 | tee "$out/${b}_$target.log"
      rc=${PIPESTATUS[0]}
      ;;
  esac
  summary="$summary $b exit $rc;"
  [ "$rc" -eq 0 ] || fail=1
done
echo "run.sh:$summary outputs in $out"
[ "$fail" -eq 0 ]
