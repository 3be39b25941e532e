#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, with .carry/baro_gpu.gz from build.sh:
# where decode's time goes, in one call (issue "Kernels that fill the GPU").
#
# STEPS (default all, in order), each under STEP_LIMIT seconds (default 300):
#   decode      decode_bw resident, 32 timed tokens (tok/s, launches per token, copy bandwidth)
#   ncu_kernels ncu per-kernel GPU time over NCU_TOKENS (default 3) decoded tokens, caches not
#               flushed (--cache-control none) so small kernels read what they cost in a step
#   ncu_matvec  ncu's speed-of-light, memory, warp-state and occupancy sections for the first
#               launches of the kernels matching NCU_MATVEC (default the quantized matvecs)
#   gate_tiny   identity gate on the tiny fixture (digest to compare with the host's)
#   conformance host JIT vs CUDA, byte for byte
#   matvec      matvec_bw (engine kernels on the model's shapes, against a copy of the same bytes)
#   prefill     (not in the default list) prefill_speed resident at PREFILL_LENGTHS (default 1024)
#   decode_q8, prefill_q8  (not in the default list) decode / prefill in the q8 precision mode
#   decode_nographs, decode_q8_nographs (not in the default list) decode with one launch per
#               kernel (`--no-graphs`), against `decode`'s replayed launch graph
#   ncu_kernels_q8 (not in the default list) ncu_kernels in the q8 precision mode
#   ncu_prefill (not in the default list) ncu per-kernel GPU time over the first NCU_PREFILL_LAUNCHES
#               (default 3000) launches of prefill_speed: its warm-up chunk of 512 rows, then the
#               timed prefill's first chunk (precision NCU_PRECISION, default f32)
#   gate_synth  (not in the default list) identity gate on the tiny synthetic pack (K-quants,
#               Q8_0) in both precisions: digests to compare with the same command on the host
# Outputs go to /tmp/profile_run/, packed into $OUT/profile_run.tgz after every step.
set -uo pipefail
cd "$(dirname "$0")/../.."
dest=${OUT:-bench/results}
out=/tmp/profile_run
rm -rf "$out" && mkdir -p "$out" "$dest"
bin=$(mktemp -d)
gunzip -c .carry/baro_gpu.gz > "$bin/baro_gpu" && chmod +x "$bin/baro_gpu" || { echo "profile_run.sh: .carry/baro_gpu.gz missing: run bench/gpu/build.sh first" >&2; exit 2; }
for n in identity_gate prefill_speed decode_bw serve_load conformance matvec_bw baro-synth-pack; do ln -sf baro_gpu "$bin/$n"; done
export BARO_COMMIT=${BARO_COMMIT:-$(cat .carry/COMMIT 2>/dev/null || echo unknown)}
export BARO_CACHE_DIR=${BARO_CACHE_DIR:-/tmp/baro_cache}
steps=${STEPS:-"decode ncu_kernels ncu_matvec gate_tiny conformance matvec"}
limit=${STEP_LIMIT:-300}
ncu_tokens=${NCU_TOKENS:-3}
ncu_matvec=${NCU_MATVEC:-"regex:matvec_(q8_0|q4_k|q5_k|q6_k)"}
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv > "$out/nvidia_smi.txt" 2>&1
pack=${BARO_PACK:-/tmp/baro_pack/qwen35moe_real_community.gguf}
need_pack() {
  [ -f "$pack" ] && return 0
  mkdir -p "$(dirname "$pack")" && "$bin/baro-synth-pack" --out "$pack" --config real --mix community > "$out/pack.log" 2>&1
}
small=(--copy-mib 64 --copy-iters 2 --pinned-mib 16)
summary=""
for s in $steps; do
  start=$(date +%s)
  case $s in
    decode) need_pack; cmd=("$bin/decode_bw" --target cuda --model "$pack" --tokens 32 --out "$out/decode.md") ;;
    ncu_kernels) need_pack; cmd=(ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --print-summary per-kernel
                  "$bin/decode_bw" --target cuda --model "$pack" --tokens "$ncu_tokens" --warmup 0 "${small[@]}") ;;
    ncu_matvec) need_pack; cmd=(ncu --clock-control none --cache-control none -k "$ncu_matvec" -c 8
                  --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats --section SchedulerStats --section InstructionStats --section ComputeWorkloadAnalysis
                  "$bin/decode_bw" --target cuda --model "$pack" --tokens 1 --warmup 0 "${small[@]}") ;;
    decode_nographs) need_pack; cmd=("$bin/decode_bw" --target cuda --model "$pack" --tokens 32 --no-graphs --out "$out/decode_nographs.md") ;;
    decode_q8_nographs) need_pack; cmd=("$bin/decode_bw" --target cuda --model "$pack" --tokens 32 --precision q8 --no-graphs --out "$out/decode_q8_nographs.md") ;;
    ncu_kernels_q8) need_pack; cmd=(ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --print-summary per-kernel
                  "$bin/decode_bw" --target cuda --model "$pack" --tokens "$ncu_tokens" --warmup 0 --precision q8 "${small[@]}") ;;
    ncu_prefill) need_pack; cmd=(ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --print-summary per-kernel -c "${NCU_PREFILL_LAUNCHES:-3000}"
                  "$bin/prefill_speed" --target cuda --model "$pack" --lengths 1024 --replay-tokens 1 --no-profile --precision "${NCU_PRECISION:-f32}") ;;
    gate_tiny) cmd=("$bin/identity_gate" --target cuda --out "$out/gate_tiny.md") ;;
    conformance) cmd=("$bin/conformance" --target cuda --out "$out/conformance.md") ;;
    matvec) cmd=("$bin/matvec_bw" --target cuda --out "$out/matvec_bw.md") ;;
    prefill) need_pack; cmd=("$bin/prefill_speed" --target cuda --model "$pack" --lengths "${PREFILL_LENGTHS:-1024}" --out "$out/prefill.md") ;;
    decode_q8) need_pack; cmd=("$bin/decode_bw" --target cuda --model "$pack" --tokens 32 --precision q8 --out "$out/decode_q8.md") ;;
    prefill_q8) need_pack; cmd=("$bin/prefill_speed" --target cuda --model "$pack" --lengths "${PREFILL_LENGTHS:-1024}" --precision q8 --out "$out/prefill_q8.md") ;;
    gate_synth) tiny=/tmp/baro_pack/tiny_community.gguf
                [ -f "$tiny" ] || { mkdir -p /tmp/baro_pack && "$bin/baro-synth-pack" --out "$tiny" --config tiny --mix community > "$out/tiny_pack.log" 2>&1; }
                cmd=(bash -c "'$bin/identity_gate' --target cuda --model '$tiny' --max-len 256 --out '$out/gate_synth_f32.md' && '$bin/identity_gate' --target cuda --model '$tiny' --max-len 256 --precision q8 --out '$out/gate_synth_q8.md'") ;;
    *) echo "profile_run.sh: unknown step $s" >&2; summary="$summary $s unknown;"; continue ;;
  esac
  echo "== $s: ${cmd[*]}"
  timeout "$limit" "${cmd[@]}" > "$out/$s.log" 2>&1
  rc=$?
  tail -n 40 "$out/$s.log"
  summary="$summary $s exit $rc ($(( $(date +%s) - start )) s);"
  echo "profile_run.sh:$summary" > "$out/summary.txt"
  tar -czf "$dest/profile_run.tgz" -C /tmp profile_run
done
echo "profile_run.sh:$summary"
