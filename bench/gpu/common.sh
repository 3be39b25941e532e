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

# run_zstd ARGS: the machine's zstd, or the one carried in .carry2/ (bench/gpu/pack_side.sh
# puts it and the libraries it needs there).
run_zstd() {
  if command -v zstd > /dev/null 2>&1; then zstd "$@"; else LD_LIBRARY_PATH=.carry2/lib .carry2/zstd "$@"; fi
}

# unpack_side SIDE: .carry2/SIDE.xz, or .carry2/SIDE.patch.zst (a zstd patch against the old
# build, made by bench/gpu/pack_side.sh: a few MB where a whole build is 23), into $bin/SIDE
# with its named links.
unpack_side() {
  local side=$1 n
  mkdir -p "$bin/$side"
  if [ -f ".carry2/$side.xz" ]; then
    xz -dc ".carry2/$side.xz" > "$bin/$side/baro_gpu" || exit 2
  elif [ -f ".carry2/$side.patch.zst" ]; then
    [ -f "$bin/old/baro_gpu" ] || unpack_side old
    run_zstd -q -f -d --long=27 --patch-from="$bin/old/baro_gpu" ".carry2/$side.patch.zst" -o "$bin/$side/baro_gpu" || exit 2
  else
    echo "neither .carry2/$side.xz nor .carry2/$side.patch.zst is here" >&2
    exit 2
  fi
  chmod +x "$bin/$side/baro_gpu"
  for n in $gpu_names; do ln -sf baro_gpu "$bin/$side/$n"; done
}

# unpack_pair: the builds named in BUILDS (default "old new") into $bin/<name>.
unpack_pair() {
  local side
  for side in ${BUILDS:-old new}; do unpack_side "$side"; done
}

# prepare_side [SIDE]: the build SIDE (default old) into $bin/SIDE, then the pack (written by
# that build if missing) and the "pack ready" stamp; sets run_dir to $bin/SIDE.
prepare_side() {
  local side=${1:-old}
  unpack_side "$side"
  run_dir=$bin/$side
  ensure_pack "$run_dir"
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
