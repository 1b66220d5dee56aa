"""The memory plan against what llama.cpp reports after loading: the planner picks the
settings, the engine loads the model with them, and llama.cpp's own log (Engine.load_log)
gives the buffers it allocated. Within 15% for both catalog models."""

from __future__ import annotations

import re
import sys

import pytest

from edge_infer.config import EngineSettings
from edge_infer.engine.native.load_report import kv_bytes_reported
from edge_infer.gguf.info import read_model_info
from edge_infer.plan import Machine, plan_settings
from edge_infer.units import GiB, MiB

_COMPUTE = re.compile(r"compute buffer size\s*=\s*([\d.]+)\s*MiB")
_MODEL = re.compile(r"(?:model|CPU_Mapped|CPU) buffer size\s*=\s*([\d.]+)\s*MiB")


def _reported(pattern: re.Pattern, lines: list[str]) -> int:
    return int(sum(float(m.group(1)) for line in lines for m in [pattern.search(line)] if m) * MiB)


def compute_bytes_reported(lines: list[str]) -> int:
    return _reported(_COMPUTE, lines)


def model_bytes_reported(lines: list[str]) -> int:
    return _reported(_MODEL, [line for line in lines if "KV" not in line and "compute" not in line])


@pytest.mark.parametrize("which", ["smollm2", "gemma3"])
def test_plan_matches_llamacpp_report_within_15_percent(request, which):
    from edge_infer.engine import Engine

    path = request.getfixturevalue(f"{which}_path")
    info = read_model_info(path)
    base = EngineSettings(n_threads=2)
    settings, plan = plan_settings(info, base, Machine(16 * GiB, 16 * GiB), ctx=2048, max_parallel=4)
    assert plan.fits and (settings.ctx, settings.parallel, settings.n_gpu_layers) == (2048, 4, 0)
    with Engine(path, settings) as engine:
        log = engine.load_log
    reported = {"weights": model_bytes_reported(log), "KV cache": kv_bytes_reported(log),
                "compute": compute_bytes_reported(log)}
    planned = {"weights": plan.estimate.weights_bytes, "KV cache": plan.estimate.kv_bytes,
               "compute": plan.estimate.compute_bytes}
    print(f"\n{which} ctx {settings.ctx} x {settings.parallel}, flash attn {settings.flash_attn}:", file=sys.stderr)
    for key in planned:
        print(f"  {key:<9} plan {planned[key] / MiB:8.2f} MiB   llama.cpp {reported[key] / MiB:8.2f} MiB   "
              f"{100 * (planned[key] - reported[key]) / reported[key]:+.1f}%", file=sys.stderr)
    for key in planned:
        assert reported[key] > 0, key
        assert abs(planned[key] - reported[key]) / reported[key] < 0.15, (key, planned[key], reported[key])
