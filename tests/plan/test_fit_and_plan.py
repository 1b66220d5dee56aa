"""Fit verdicts and the memory planner without llama.cpp: verdict thresholds, nvidia-smi
parsing, GPU layers, slots and context traded for memory."""

from __future__ import annotations

import pytest

from edge_infer.plan import (FITS, NO_FIT, TIGHT, GpuDevice, Machine, estimate_memory, fit_verdict,
                             parse_nvidia_smi, plan_memory, plan_settings, verdict)
from edge_infer.units import GiB, MiB


def test_verdict_thresholds():
    assert verdict(80, 100) == FITS and verdict(81, 100) == TIGHT
    assert verdict(100, 100) == TIGHT and verdict(101, 100) == NO_FIT and verdict(1, 0) == NO_FIT


def test_nvidia_smi_parsing():
    gpus = parse_nvidia_smi("NVIDIA H200, 143771, 140000\nNVIDIA T4, 15360, 15000\n\nbad line\n")
    assert [g.name for g in gpus] == ["NVIDIA H200", "NVIDIA T4"]
    assert gpus[1].total_bytes == 15360 * MiB and gpus[1].free_bytes == 15000 * MiB


@pytest.fixture(scope="module")
def smol(smollm2_path):
    from edge_infer.gguf.info import read_model_info

    return read_model_info(smollm2_path)


def test_fit_verdict_ram_and_gpu(smol):
    cpu_only = Machine(4 * GiB, 4 * GiB)
    fit = fit_verdict(smol, cpu_only, 4096, 1)
    assert fit.ram == FITS and fit.gpu is None and fit.best == FITS
    tiny_gpu = Machine(4 * GiB, 4 * GiB, (GpuDevice("g", 256 * MiB, 200 * MiB),), True)
    fit = fit_verdict(smol, tiny_gpu, 4096, 1)
    assert fit.gpu == NO_FIT and fit.ram == FITS and fit.best == FITS
    assert fit.gpu_need > 200 * MiB


def test_plan_puts_layers_on_the_gpu_it_has(smol):
    big = Machine(8 * GiB, 8 * GiB, (GpuDevice("g", 16 * GiB, 16 * GiB),), True)
    plan = plan_memory(smol, big, ctx=4096, parallel=1)
    assert plan.fits and plan.n_gpu_layers == smol.block_count + 1  # every layer and the output
    small = Machine(8 * GiB, 8 * GiB, (GpuDevice("g", 400 * MiB, 300 * MiB),), True)
    plan = plan_memory(smol, small, ctx=4096, parallel=1)
    assert plan.fits and 0 < plan.n_gpu_layers < smol.block_count + 1
    assert plan.estimate.gpu_bytes <= plan.gpu_budget
    more = plan_memory(smol, small, ctx=4096, parallel=1, n_gpu_layers=plan.n_gpu_layers + 1)
    assert more.estimate.gpu_bytes > plan.gpu_budget and not more.fits
    # A GPU the llama.cpp build cannot use counts for nothing.
    cpu_build = Machine(8 * GiB, 8 * GiB, (GpuDevice("g", 16 * GiB, 16 * GiB),), False)
    assert plan_memory(smol, cpu_build, ctx=4096).n_gpu_layers == 0


def test_plan_trades_slots_then_context_for_memory(smol, monkeypatch):
    from edge_infer.plan import cache_sizes
    from edge_infer.plan.fit import engine_estimate_kwargs

    # The RAM below is built from a need on this machine; an auto prompt cache (a share of the
    # RAM) would shrink with it: a fixed one keeps the arithmetic plain.
    monkeypatch.setattr(cache_sizes, "prompt_cache_bytes", lambda mib, ram_available=None: 128 * MiB)

    # As the engine sizes it: a pool of min(slots, 2) contexts and the prompt cache's cap.
    need_1x4096 = estimate_memory(smol, 4096, 1, **engine_estimate_kwargs()).total_bytes
    ram = int(need_1x4096 / 0.9) + MiB
    plan = plan_memory(smol, Machine(ram, ram), ctx=4096, max_parallel=8)
    assert plan.fits and 1 <= plan.parallel < 8 and plan.ctx == 4096
    assert plan.estimate.total_bytes <= plan.ram_budget
    assert f"{plan.parallel} slots instead of 8" in plan.notes[0]
    roomy = plan_memory(smol, Machine(8 * GiB, 8 * GiB), ctx=4096, max_parallel=8)
    assert roomy.parallel == 8 and not roomy.notes
    # Less RAM, context left open: the context shrinks (in steps of 256).
    plan = plan_memory(smol, Machine(ram - 60 * MiB, ram - 60 * MiB))  # KV at 4096: 90 MiB
    assert plan.fits and plan.ctx < 4096 and plan.ctx % 256 == 0 and "context" in plan.notes[0]
    # Context fixed by the caller and too large: reported, not changed.
    plan = plan_memory(smol, Machine(200 * MiB, 200 * MiB), ctx=8192)
    assert not plan.fits and plan.ctx == 8192 and "needs" in plan.notes[-1]


def test_plan_settings_fills_what_was_left_open(smol):
    from edge_infer.config import EngineSettings

    settings, plan = plan_settings(smol, EngineSettings(ctx=4096, parallel=1), Machine(8 * GiB, 8 * GiB),
                                   max_parallel=4)
    assert settings.parallel == plan.parallel == 4 and settings.ctx == 4096 and settings.n_gpu_layers == 0
