#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, with .carry/baro_gpu.gz from build.sh:
# the batched-prefill and expert-staging measurements (issues 5 and 6) in one call.
#
# STEPS (default all, in this order), each under its own time limit (seconds, STEP_LIMIT):
#   fp32_rate       the measured f32 mul+add and fma rates (fp32_rate.cu, nvcc), passed to
#                   prefill_speed as --flop-rate (the expert matvecs' floor)
#   gate_tiny       identity gate, tiny fixture, the default 26 prompts, greedy 64
#   gate_tiny_neg   the negative control on the tiny fixture (prompts to 1024, greedy 16)
#   gate_pack       identity gate on the full-size pack, resident (GATE_ARGS, default
#                   "--max-len 1024 --greedy 16": replay is the 22 tok/s decode path)
#   gate_pack_staged  the same prompts with --vram-budget $STAGED_BUDGET (default 24G; its digest must equal gate_pack's)
#   decode          decode_bw resident;  decode_staged  decode_bw --vram-budget "$staged_budget"
#   prefill         prefill_speed resident (PREFILL_ARGS, default "--lengths 1024,8192,32768")
#   prefill_staged  prefill_speed --vram-budget "$staged_budget"
#   long_context    (not in the default list) long_context on the pack, resident (LONG_ARGS, default
#                   "--lengths 100000 --depths 50 --precision q8 --boundaries 1": one prompt, its
#                   prefill, batched = replay over the last chunk boundary, the memory plan;
#                   give it STEP_LIMIT=590; bench/NOTES.md says why one boundary fits one call)
#   conformance     (not in the default list) host JIT vs CUDA, byte for byte, and bounds-error parity
#   serve           (not in the default list) serve_load on the pack, resident: 1, 4, 16, 64 streams (SERVE_ARGS, default
#                   "--max-tokens 8 --max-seconds 200"; ≈ 1 min of levels and ≈ 4 of memory requests on the H200), then 1000 requests at 64 streams with the
#                   device's free memory before and after (SERVE_MEMORY_ARGS, default
#                   "--memory-requests 1000 --memory-max-tokens 4")
# Every output goes to /tmp/prefill_run/ and is packed into $OUT/prefill_run.tgz at the end
# (the device tool returns at most 8 files), with $OUT/summary.txt beside it.
set -uo pipefail
cd "$(dirname "$0")/../.."
dest=${OUT:-bench/results}
out=/tmp/prefill_run
rm -rf "$out" && mkdir -p "$out" "$dest"
bin=$(mktemp -d)
gunzip -c .carry/baro_gpu.gz > "$bin/baro_gpu" && chmod +x "$bin/baro_gpu" || { echo "prefill_run.sh: .carry/baro_gpu.gz missing: run bench/gpu/build.sh first" >&2; exit 2; }
for n in identity_gate prefill_speed long_context decode_bw serve_load conformance baro-synth-pack; do ln -sf baro_gpu "$bin/$n"; done
export BARO_COMMIT=${BARO_COMMIT:-$(cat .carry/COMMIT 2>/dev/null || echo unknown)}
export BARO_CACHE_DIR=${BARO_CACHE_DIR:-/tmp/baro_cache}
steps=${STEPS:-"fp32_rate gate_tiny gate_tiny_neg gate_pack gate_pack_staged decode decode_staged prefill prefill_staged"}
limit=${STEP_LIMIT:-300}
staged_budget=${STAGED_BUDGET:-24G}
gate_args=${GATE_ARGS:-"--max-len 1024 --greedy 16"}
prefill_args=${PREFILL_ARGS:-"--lengths 1024,8192,32768"}
long_args=${LONG_ARGS:-"--lengths 100000 --depths 50 --precision q8 --boundaries 1"}
serve_args=${SERVE_ARGS:-"--max-tokens 8 --max-seconds 200"}
serve_memory_args=${SERVE_MEMORY_ARGS:-"--memory-requests 1000 --memory-max-tokens 4"}
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv > "$out/nvidia_smi.txt" 2>&1
pack=${BARO_PACK:-/tmp/baro_pack/qwen35moe_real_community.gguf}
need_pack() {
  [ -f "$pack" ] && return 0
  mkdir -p "$(dirname "$pack")" && "$bin/baro-synth-pack" --out "$pack" --config real --mix community
}
summary=""
flop_rate=()
for s in $steps; do
  start=$(date +%s)
  case $s in
    fp32_rate)
      echo "== fp32_rate"
      nvcc -O3 -arch=sm_90 -o /tmp/fp32_rate bench/gpu/fp32_rate.cu && /tmp/fp32_rate | tee "$out/fp32_rate.log"
      rc=${PIPESTATUS[0]}
      r=$(sed -n 's/^MULADD_TFLOPS=//p' "$out/fp32_rate.log")
      [ -n "$r" ] && flop_rate=(--flop-rate "$r")
      summary="$summary $s exit $rc;"
      continue ;;
    conformance) cmd=("$bin/conformance" --target cuda) ;;
    gate_tiny) cmd=("$bin/identity_gate" --target cuda) ;;
    gate_tiny_neg) cmd=("$bin/identity_gate" --target cuda --negative-control --max-len 1024 --greedy 16) ;;
    gate_pack) need_pack; cmd=("$bin/identity_gate" --target cuda --model "$pack" $gate_args) ;;
    gate_pack_staged) need_pack; cmd=("$bin/identity_gate" --target cuda --model "$pack" $gate_args --vram-budget "$staged_budget") ;;
    decode) need_pack; cmd=("$bin/decode_bw" --target cuda --model "$pack" --tokens 32) ;;
    decode_staged) need_pack; cmd=("$bin/decode_bw" --target cuda --model "$pack" --tokens 32 --vram-budget "$staged_budget") ;;
    prefill) need_pack; cmd=("$bin/prefill_speed" --target cuda --model "$pack" $prefill_args "${flop_rate[@]}") ;;
    prefill_staged) need_pack; cmd=("$bin/prefill_speed" --target cuda --model "$pack" $prefill_args --vram-budget "$staged_budget" "${flop_rate[@]}") ;;
    long_context) need_pack; cmd=("$bin/long_context" --target cuda --model "$pack" $long_args) ;;
    serve) need_pack; cmd=("$bin/serve_load" --target cuda --model "$pack" --levels 1,4,16,64 $serve_args $serve_memory_args) ;;
    *) echo "prefill_run.sh: unknown step $s" >&2; summary="$summary $s unknown;"; continue ;;
  esac
  echo "== $s: ${cmd[*]#"$bin/"}"
  timeout "$limit" "${cmd[@]}" --out "$out/$s.md" 2>&1 | tee "$out/$s.log"
  rc=${PIPESTATUS[0]}
  summary="$summary $s exit $rc ($(( $(date +%s) - start )) s);"
  # After every step, so a call stopped at its limit still returns what finished.
  echo "prefill_run.sh:$summary" > "$out/summary.txt"
  tar -czf "$dest/prefill_run.tgz" -C /tmp prefill_run
done
echo "prefill_run.sh:$summary"
echo "prefill_run.sh:$summary" > "$out/summary.txt"
cp "$out/summary.txt" "$dest/summary.txt"
tar -czf "$dest/prefill_run.tgz" -C /tmp prefill_run
