"""Two llama.cpp builds of the same version, side by side in one run: the engine in a
child `edge-infer bench` per pass, each child pointed at one build's libraries with
LLAMA_CPP_LIB_PATH (the Python bindings are the same; only the C libraries differ).
Children alternate at each concurrency so drift in machine speed hits both alike."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from edge_infer.bench.workload import PassResult, median_pass


def _child_pass(model: str, lib_dir: Path | None, concurrency: int, label: str, extra: list[str],
                overrides: dict[str, str]) -> PassResult:
    env = dict(os.environ)
    env.pop("LLAMA_CPP_LIB_PATH", None)
    env.update(overrides)
    if lib_dir is not None:
        env["LLAMA_CPP_LIB_PATH"] = str(lib_dir)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "pass.json"
        cmd = [sys.executable, "-m", "edge_infer", "bench", model, "--no-baseline",
               "--concurrency", str(concurrency), "--json", str(out), *extra]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"{label} bench failed: {(proc.stderr or proc.stdout).strip().splitlines()[-1:]}")
        data = json.loads(out.read_text())
    return PassResult(**{**data["engine"][0], "system": label})


def compare_builds(model: str, builds: list[tuple[str, Path | None, dict[str, str]]], levels: list[int],
                   repeat: int, extra: list[str]) -> dict[str, list[PassResult]]:
    """{label: the median pass at each level}. `builds`: (label, lib dir or None = installed,
    environment overrides such as EDGE_INFER_CPU_VARIANT)."""
    runs: dict[tuple[str, int], list[PassResult]] = {}
    for _rep in range(max(1, repeat)):
        for c in levels:
            for label, lib, overrides in builds:
                result = _child_pass(model, lib, c, label, extra, overrides)
                runs.setdefault((label, c), []).append(result)
                print(f"  {label:<9} c={c}: {result.agg_tok_s:.1f} tok/s", file=sys.stderr)
    return {label: [median_pass(runs[(label, c)]) for c in levels] for label, _, _ in builds}
