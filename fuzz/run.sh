#!/usr/bin/env bash
# Builds the fuzz targets with cargo-fuzz on stable Rust and runs each for a while.
#   fuzz/run.sh [SECONDS_PER_TARGET] [TARGET...]     default: 600 s, every target
#   FUZZ_RUNS=N       stop each target after N executions instead (or first: both apply)
#   FUZZ_PARALLEL=K   run K targets at a time (default 1; each target is one process)
# Needs `cargo install cargo-fuzz` (0.13). The binaries need the crate's `libfuzzer` feature
# (off in the workspace, so `cargo test` only replays the corpus): by hand,
#   cargo fuzz run --features libfuzzer -s none TARGET [CORPUS_DIR] -- [LIBFUZZER_FLAGS]
# They build into the workspace's target/x86_64-unknown-linux-gnu/release/.
# Stable rustc has no -Zsanitizer, so the targets are built with `-s none`: libFuzzer's
# coverage guidance (sancov, stable flags) without AddressSanitizer; Rust's bounds checks and
# overflow checks (on: debug assertions) catch over-reads in safe code. Set FUZZ_ASAN=1 to
# build with AddressSanitizer through RUSTC_BOOTSTRAP=1 (nightly flags on a stable compiler:
# works, unsupported).
# Each target runs on a scratch corpus under fuzz/work/ seeded from fuzz/corpus/ and
# fuzz/regressions/ (the committed inputs stay small); crashes land in fuzz/artifacts/TARGET/
# (copy one into fuzz/regressions/TARGET/ once fixed: `cargo test` replays it); logs in
# fuzz/logs/. The last lines per target are libFuzzer's final stats:
# `stat::number_of_executed_units` is the number of executions (fuzz/RESULTS.md records them).
# Dictionaries of each input format's keywords are in fuzz/dict/.
set -euo pipefail
cd "$(dirname "$0")"
secs="${1:-600}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(gguf safetensors tokenizer_json tokenizer_gguf chat_template ir_text server_request)
san=(-s none)
if [ "${FUZZ_ASAN:-0}" = 1 ]; then export RUSTC_BOOTSTRAP=1; san=(-s address); fi
cargo fuzz build --features libfuzzer "${san[@]}"
runs=()
[ -n "${FUZZ_RUNS:-}" ] && runs=(-runs="$FUZZ_RUNS")
mkdir -p logs
one() {
  local t="$1"
  mkdir -p "work/$t" "artifacts/$t"
  cp -n corpus/"$t"/* regressions/"$t"/* "work/$t/" 2>/dev/null || true
  local dict=()
  [ -f "dict/$t.dict" ] && dict=(-dict="dict/$t.dict")
  echo "fuzz: $t for ${secs}s${FUZZ_RUNS:+ or $FUZZ_RUNS runs}" >&2
  cargo fuzz run --features libfuzzer "${san[@]}" "$t" "work/$t" -- -max_total_time="$secs" "${runs[@]}" -timeout=10 \
    -rss_limit_mb=4096 -max_len=262144 -print_final_stats=1 "${dict[@]}" -artifact_prefix="artifacts/$t/" >"logs/$t.log" 2>&1 \
    || echo "fuzz: $t stopped with a finding: see logs/$t.log and artifacts/$t/" >&2
  echo "fuzz: $t: $(grep -E '^stat::number_of_executed_units' "logs/$t.log" | tail -1)" >&2
}
running=0
for t in "${targets[@]}"; do
  one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "${FUZZ_PARALLEL:-1}" ]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait
