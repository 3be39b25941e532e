#!/usr/bin/env bash
# The client tier: drives `baro-engine serve` (built-in model, host target) with the real
# `openai` and `ollama` Python clients (clients.py). Not part of `./dev test`: it needs PyPI
# (or BARO_CLIENTS_VENV pointing at a venv holding openai, ollama, jsonschema and pydantic)
# and a built binary (`cargo build -p baro-engine`). Prints SKIPPED with the reason when it
# cannot run, and exits 0 then; exits 1 when a check fails.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
bin="$target/debug/baro-engine"
venv="${BARO_CLIENTS_VENV:-$target/clients-venv}"
if [ ! -x "$bin" ]; then echo "SKIPPED: no $bin (run cargo build -p baro-engine first)"; exit 0; fi
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv" && "$venv/bin/pip" install -q openai ollama jsonschema pydantic \
    || { echo "SKIPPED: cannot make the client venv at $venv (no PyPI?)"; rm -rf "$venv"; exit 0; }
fi
log="$(mktemp)"
"$bin" serve --target host --port 0 --api-key client-test --max-tokens 96 --max-context 1024 --quiet >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null' EXIT
for _ in $(seq 1 120); do grep -q '^ready on ' "$log" && break; sleep 1; done
url="$(sed -n 's/^ready on //p' "$log")"
if [ -z "$url" ]; then echo "FAILED: the server did not start:"; cat "$log"; exit 1; fi
echo "RAN: openai $("$venv/bin/python" -c 'import openai; print(openai.__version__)'), ollama client, against $url"
"$venv/bin/python" "$here/clients.py" "$url" client-test
