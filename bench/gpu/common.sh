# Sourced by the GPU-machine scripts (ab8k.sh, ab_decode.sh, base_run.sh) from the repository
# root: what each does before measuring. Sets out (= $OUT, made), t0, bin (a temporary folder),
# BARO_CACHE_DIR and pack (the full-size synthetic pack's path); defines the helpers below.
out=${OUT:-bench/results}
mkdir -p "$out"
t0=$(date +%s)
bin=$(mktemp -d)
export BARO_CACHE_DIR=/tmp/baro_cache
pack=/tmp/baro_pack/qwen35moe_real_community.gguf
# The names baro_gpu answers to (it picks its program by the name it is called under).
gpu_names="prefill_speed decode_bw identity_gate long_context baro-synth-pack"

# stamp WHAT: WHAT and the seconds since the start, printed and added to $out/times.txt.
stamp() { echo "$1 $(( $(date +%s) - t0 )) s" | tee -a "$out/times.txt"; }

# unpack_pair: .carry2/{old,new}.xz into $bin/old and $bin/new, each with its named links.
unpack_pair() {
  local side n
  for side in old new; do
    mkdir -p "$bin/$side" && xz -dc ".carry2/$side.xz" > "$bin/$side/baro_gpu" && chmod +x "$bin/$side/baro_gpu" || exit 2
    for n in $gpu_names; do ln -sf baro_gpu "$bin/$side/$n"; done
  done
}

# prepare_old: .carry2/old.xz alone into $bin/old, with its named links, then the pack
# (written by that build if missing) and the "pack ready" stamp.
prepare_old() {
  local n
  mkdir -p "$bin/old" && xz -dc .carry2/old.xz > "$bin/old/baro_gpu" && chmod +x "$bin/old/baro_gpu" || exit 2
  for n in $gpu_names; do ln -sf baro_gpu "$bin/old/$n"; done
  ensure_pack "$bin/old"
  stamp "pack ready"
}

# unpack_one: .carry/baro_gpu.gz (bench/gpu/build.sh) into $bin, with its named links.
unpack_one() {
  local n
  gunzip -c .carry/baro_gpu.gz > "$bin/baro_gpu" && chmod +x "$bin/baro_gpu" || exit 2
  for n in $gpu_names; do ln -sf baro_gpu "$bin/$n"; done
}

# ensure_pack DIR: writes the pack with DIR's baro-synth-pack unless it is there already.
ensure_pack() {
  mkdir -p "$(dirname "$pack")"
  [ -f "$pack" ] || "$1/baro-synth-pack" --out "$pack" --config real --mix community > /dev/null 2>&1
}
