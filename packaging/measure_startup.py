"""Start-up to first token: the binary vs the installed package, side by side in one run.

    .venv/bin/python packaging/measure_startup.py MODEL.gguf [--runs 5]

Each run is a fresh process `edge-infer run MODEL "Hello" -n 1`; the clock stops at the
first byte on stdout. Prints the median per command and the ratio.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def time_to_first_byte(cmd: list[str]) -> float:
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    first = proc.stdout.read(1)
    elapsed = time.perf_counter() - start
    proc.communicate()
    if not first or proc.returncode != 0:
        raise SystemExit(f"{cmd[0]} produced no text (exit {proc.returncode})")
    return elapsed


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    systems = {"installed package": [str(ROOT / ".venv" / "bin" / "edge-infer")],
               "binary (one file)": [str(ROOT / "dist" / "edge-infer")],
               "binary (one folder)": [str(ROOT / "dist" / "onedir" / "edge-infer" / "edge-infer")]}
    systems = {k: v for k, v in systems.items() if os.path.exists(v[0])}
    times: dict[str, list[float]] = {k: [] for k in systems}
    for _ in range(args.runs):  # interleaved, so drift in machine speed hits all alike
        for name, cmd in systems.items():
            times[name].append(time_to_first_byte(cmd + ["run", args.model, "Hello", "-n", "1", "--temperature", "0"]))
    base = statistics.median(times["installed package"])
    print(f"{'command':<22} {'first token (median)':>21} {'min':>7} {'x package':>10} {'size':>9}")
    for name, cmd in systems.items():
        med = statistics.median(times[name])
        size = sum(f.stat().st_size for f in Path(cmd[0]).parent.rglob("*") if f.is_file()) \
            if "folder" in name else Path(cmd[0]).stat().st_size
        size_txt = "-" if "package" in name else f"{size / 2**20:.0f} MiB"
        print(f"{name:<22} {med:>19.2f} s {min(times[name]):>6.2f}s {med / base:>10.2f} {size_txt:>9}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
