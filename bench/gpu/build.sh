#!/usr/bin/env bash
# Builds the GPU binaries here, in release, with LLVM linked statically, strips and gzips them
# into .carry/ (ignored by git) for the GPU machine. By default that is one executable,
# `baro_gpu`, which is every benchmark and the pack writer at once (chosen by the name it is
# called under; run.sh makes the links): each binary carries its own static LLVM (~23 MB
# gzipped), and a call's carry (64 MiB, the repository included) holds only two of them.
#   bench/gpu/build.sh        then carry .carry/baro_gpu.gz and .carry/COMMIT
# BARO_BINS picks other bench binaries instead (e.g. "identity_gate"; each ~23 MB gzipped);
# with BARO_BINS set, BARO_SYNTH_PACK=0 skips `baro-synth-pack` (baro-engine's pack writer).
#
# baro-dsl's `llvm-static` feature cannot be enabled in this workspace as it stands: the
# inkwell dependency always asks for `llvm19-1-force-dynamic`, and llvm-sys refuses two link
# modes at once. So the build runs on a staged copy of the sources whose baro-dsl manifest
# drops the dynamic request; the working tree is never modified.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
out=$root/.carry
stage=$out/src
mkdir -p "$out"
# In a worktree .git is a file: ask git where the (shared) exclude file is.
exclude=$(git rev-parse --git-path info/exclude)
grep -qx '/.carry/' "$exclude" 2>/dev/null || echo '/.carry/' >> "$exclude"

# The commit is read when the sources are staged, not after the (long) build.
commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || commit="$commit-dirty"
# Cargo rebuilds a file whose mtime is newer than its last build's start. tar keeps the tree's
# mtimes, so a file edited while an earlier build ran would look older than that build and be
# skipped: the fresh copy takes the old stage's mtime where a file's bytes are unchanged and
# the copy time where they changed (or are new).
fresh=$(mktemp -d "$out/src.XXXXXX")
tar --exclude=./target --exclude=./.carry --exclude=./.carry2 --exclude=./.git -cf - . | tar -xf - -C "$fresh"
sed -i 's/"llvm19-1-force-dynamic", //' "$fresh/baro-dsl/Cargo.toml"
(cd "$fresh" && find . -type f -print0) | while IFS= read -r -d '' f; do
  if [ -f "$stage/$f" ] && cmp -s "$fresh/$f" "$stage/$f"; then touch -r "$stage/$f" "$fresh/$f"; else touch "$fresh/$f"; fi
done
rm -rf "$stage" && mv "$fresh" "$stage"
(cd "$stage" && CARGO_TARGET_DIR="$out/target" cargo build --release -p baro-bench --features baro-dsl/llvm-static)
bins=${BARO_BINS:-baro_gpu}
# The pack writer, built with the same features (so nothing rebuilds); `baro_gpu` holds it.
if [ -n "${BARO_BINS:-}" ] && [ "${BARO_SYNTH_PACK:-1}" != 0 ] && [ -f "$stage/baro-engine/src/cli/synth_pack_main.rs" ]; then
  (cd "$stage" && CARGO_TARGET_DIR="$out/target" cargo build --release -p baro-bench -p baro-engine --bin baro-synth-pack --features baro-dsl/llvm-static)
  bins="$bins baro-synth-pack"
fi

for b in $bins; do
  strip -o "$out/$b" "$out/target/release/$b"
  gzip -9 -f "$out/$b"
done
echo "$commit" > "$out/COMMIT"
ls -l "$out"/*.gz "$out/COMMIT"
echo "build.sh: carry$(for b in $bins; do printf ' .carry/%s.gz' "$b"; done) .carry/COMMIT, then run bench/gpu/run.sh there"
