#!/usr/bin/env bash
# Here, after bench/gpu/build.sh: puts that build into .carry2/ (ignored by git) under NAME,
# for the GPU scripts that compare builds (ab_decode.sh, knob_decode.sh, stall_run.sh):
#   bench/gpu/pack_side.sh old     .carry2/old.xz (the whole build, ~23 MB)
#   bench/gpu/pack_side.sh NAME    .carry2/NAME.patch.zst, a zstd patch against old (a few MB,
#                                  so several builds fit in one call's 64 MiB carry)
# and NAME.commit. A patch also copies this machine's zstd and the libraries it links into
# .carry2/ (used where the GPU machine has no zstd). Carry `.carry2`, without .carry/.
set -euo pipefail
cd "$(dirname "$0")/../.."
name=${1:?usage: bench/gpu/pack_side.sh old|NAME}
[ -f .carry/baro_gpu.gz ] && [ -f .carry/COMMIT ] || { echo "pack_side: no .carry/baro_gpu.gz: run bench/gpu/build.sh first" >&2; exit 1; }
exclude=$(git rev-parse --git-path info/exclude)
grep -qx '/.carry2/' "$exclude" 2>/dev/null || echo '/.carry2/' >> "$exclude"
mkdir -p .carry2
if [ "$name" = old ]; then
  gunzip -c .carry/baro_gpu.gz | xz -T2 -6 > .carry2/old.xz
else
  [ -f .carry2/old.xz ] || { echo "pack_side: no .carry2/old.xz to patch against: pack the base build as old first" >&2; exit 1; }
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  xz -dc .carry2/old.xz > "$tmp/old"
  gunzip -c .carry/baro_gpu.gz > "$tmp/new"
  zstd -q -f -${ZSTD_LEVEL:-12} --long=27 --patch-from="$tmp/old" "$tmp/new" -o ".carry2/$name.patch.zst"
  # The patch applied here must give the build back, byte for byte.
  zstd -q -d --long=27 --patch-from="$tmp/old" ".carry2/$name.patch.zst" -o "$tmp/check"
  cmp -s "$tmp/check" "$tmp/new" || { echo "pack_side: the patch does not give the build back" >&2; exit 1; }
  cp "$(command -v zstd)" .carry2/zstd
  mkdir -p .carry2/lib
  ldd "$(command -v zstd)" | awk '/=> \// { print $3 }' | grep -v '/libc\.so' | xargs -r -I{} cp -L {} .carry2/lib/
fi
cp .carry/COMMIT ".carry2/$name.commit"
ls -la .carry2 | sed 1d
