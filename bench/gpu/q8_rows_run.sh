#!/usr/bin/env bash
# Runs on the GPU machine with .carry2/{old,new}.xz and .carry2/{old,new}.commit (as ab_run.sh)
# and the sm_90 PTX of the kernels to compare in .carry2/ptx/ (new) and .carry2/ptx_old/ (old),
# written here by `cargo run -p baro-engine --example kernel_asm -- DIR KERNEL...`: for each
# PTX file ptxas's register and spill report and the SASS instruction count ($OUT/ptxas/), then
# q8 prefill at 1k on both builds, the synthetic pack's identity gate (both precisions) and q8
# decode on the new one ($OUT/profile_{old,new}.tgz), and, while under 240 s, ncu per-kernel
# time over the new build's first q8 prefill launches ($OUT/ncu/).
set -u
cd "$(dirname "$0")/../.."
out=${OUT:-bench/results}
t0=$(date +%s)
mkdir -p "$out/ptxas"
for f in .carry2/ptx/*.ptx .carry2/ptx_old/*.ptx; do
  [ -f "$f" ] || continue
  tag=$(basename "$(dirname "$f")")_$(basename "$f" .sm_90.ptx)
  ptxas -arch=sm_90 -v -o /tmp/k.cubin "$f" > "$out/ptxas/$tag.txt" 2>&1
  cuobjdump -sass /tmp/k.cubin > /tmp/k.sass 2>&1
  echo "$tag: $(grep -o 'Used [0-9]* registers' "$out/ptxas/$tag.txt" | head -1), $(grep -o '[0-9]* bytes spill stores' "$out/ptxas/$tag.txt" | head -1), SASS $(grep -cE '^\s+/\*[0-9a-f]{4,}\*/' /tmp/k.sass)" | tee -a "$out/ptxas/summary.txt"
done
SIDES="old new" STEP_LIMIT=${STEP_LIMIT:-100} STEPS_OLD="prefill_q8 decode_q8" STEPS_NEW="prefill_q8 decode_q8 gate_synth" OUT="$out" bash bench/gpu/ab_run.sh
echo "elapsed $(( $(date +%s) - t0 )) s"
if [ $(( $(date +%s) - t0 )) -lt 240 ]; then
  NCU_PRECISION=q8 NCU_PREFILL_LAUNCHES=2500 STEPS=ncu_prefill STEP_LIMIT=90 OUT="$out/ncu" bash bench/gpu/profile_run.sh
fi
echo "elapsed $(( $(date +%s) - t0 )) s"
