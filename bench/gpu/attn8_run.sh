#!/usr/bin/env bash
# Runs on the GPU machine with .carry2/{old,new}.{xz,commit} and the attention_rows PTX of
# both in .carry2/ptx{_old,}/: ptxas's register and spill report for each, then q8 prefill at
# 8k on both and the new build's identity gates. Results under $OUT.
set -u
cd "$(dirname "$0")/../.."
out=${OUT:-bench/results}
mkdir -p "$out/ptxas" .carry
for f in .carry2/ptx_old/*.ptx .carry2/ptx/*.ptx; do
  tag=$(basename "$(dirname "$f")")_$(basename "$f" .sm_90.ptx)
  ptxas -arch=sm_90 -v -o /tmp/k.cubin "$f" > "$out/ptxas/$tag.txt" 2>&1
  echo "$tag: $(grep -oE 'Used [0-9]+ registers|[0-9]+ bytes spill (stores|loads)' "$out/ptxas/$tag.txt" | tr '\n' ' ')" | tee -a "$out/ptxas/summary.txt"
done
SIDES="old new" STEP_LIMIT=150 PREFILL_LENGTHS=8192 STEPS_OLD="prefill_q8" STEPS_NEW="prefill_q8 gate_synth gate_tiny" OUT="$out" bash bench/gpu/ab_run.sh
