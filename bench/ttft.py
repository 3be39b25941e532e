#!/usr/bin/env python3
"""Time to first token of `baro-engine` (the `./dev run` binary), from process start.

usage: bench/ttft.py BINARY [RUNS] [-- ENGINE ARGS...]

Starts BINARY RUNS times (default 3) with ENGINE ARGS (default: the built-in model, host
target, 8 tokens) and prints, per run, the seconds until the first generated text reaches
stdout (the first byte after the blank line that follows the prompt line) and until exit.
The first run of a fresh cache directory is the cold one; set BARO_CACHE_DIR to choose it.
"""
import os
import subprocess
import sys
import time


def one(cmd):
    start = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    seen_blank, first, line = False, None, b""
    while True:
        b = p.stdout.read(1)
        if not b:
            break
        if seen_blank and first is None:
            first = time.monotonic() - start
        line += b
        if b == b"\n":
            if line == b"\n":
                seen_blank = True
            line = b""
    p.wait()
    return first, time.monotonic() - start, p.returncode


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    extra = ["--target", "host", "--max-tokens", "8", "--temperature", "0"]
    if "--" in args:
        i = args.index("--")
        args, extra = args[:i], args[i + 1 :]
    binary, runs = args[0], int(args[1]) if len(args) > 1 else 3
    for r in range(runs):
        first, total, rc = one([binary] + extra)
        shown = "none" if first is None else f"{first:.2f}"
        print(f"run {r + 1}: first token {shown} s, exit {total:.2f} s, status {rc}", flush=True)


if __name__ == "__main__":
    main()
