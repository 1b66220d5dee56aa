"""The memory plan stays true: weights + KV pool + compute + prompt cache + runtime, as
planned before loading, within 10% of the RSS a real engine reaches with its pool and its
prompt cache full. Each model in a fresh process, so nothing else is in the measured growth."""

import json
import subprocess
import sys

import pytest

SCRIPT = r"""
import json, sys
import psutil
from edge_infer.config import EngineSettings
from edge_infer.engine import Engine, Request, SamplingParams
from edge_infer.engine.native.llama import init_backend
from edge_infer.gguf.info import read_model_info
from edge_infer.plan import engine_estimate_kwargs, estimate_memory

path = sys.argv[1]
settings = EngineSettings(ctx=1024, parallel=2, n_threads=2, prompt_cache_mib=32)
plan = estimate_memory(read_model_info(path), 1024, 2, **engine_estimate_kwargs(settings))
init_backend()  # the libraries are part of the process, not of the plan
proc = psutil.Process()
base = proc.memory_info().rss
engine = Engine(path, settings)
text = " ".join(f"Line {i}: the quick brown fox jumps over the lazy dog." for i in range(200))
toks = engine.tokenize(text)
g = SamplingParams(temperature=0.0, max_tokens=4, ignore_eos=True)
# The pool full: two sequences of 1,000 tokens each in 2,048 cells ...
streams = [engine.submit(Request(prompt_tokens=toks[i * 7:i * 7 + 1000], sampling=g)) for i in range(2)]
for s in streams:
    s.result()
# ... then six more conversations, so the earlier ones fill the 32 MiB prompt cache.
for i in range(2, 8):
    engine.generate(Request(prompt_tokens=toks[i * 7:i * 7 + 400], sampling=g))
snap = engine.snapshot()
print(json.dumps({"rss": proc.memory_info().rss - base, "plan": plan.total_bytes,
                  "cells": snap.kv_cells_total, "planned_cells": plan.n_ctx,
                  "cache": snap.prompt_cache_bytes, "cache_cap": plan.prompt_cache_bytes}))
"""


@pytest.mark.parametrize("which", ["smollm2_path", "gemma3_path"])
def test_plan_within_10_percent_of_rss_with_a_full_pool(request, which):
    path = request.getfixturevalue(which)
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(path)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["cells"] == got["planned_cells"] == 2048
    assert got["cache"] > got["cache_cap"] * 0.6  # the prompt cache really is (nearly) full
    error = abs(got["plan"] - got["rss"]) / got["rss"]
    print(f"{which}: plan {got['plan'] / 2**20:.1f} MiB, RSS growth {got['rss'] / 2**20:.1f} MiB, {error:.1%}")
    assert error <= 0.10, got
