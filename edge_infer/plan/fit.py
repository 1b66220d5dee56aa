"""Fit verdicts and the memory plan: which GPU layers, context and slots this machine holds.

Budgets are shares of what is free now (plan.machine); sizes come from plan.estimate,
configured as the engine creates its context (engine_estimate_kwargs).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from edge_infer.gguf.info import ModelInfo
from edge_infer.plan import machine as machines
from edge_infer.plan.estimate import MIN_CTX_STEP, MemoryEstimate, largest_where, estimate_memory
from edge_infer.plan.machine import Machine
from edge_infer.units import GiB, MiB

FITS, TIGHT, NO_FIT = "fits", "tight", "does not fit"
FIT_MARGIN = 0.80     # at most this share of what is free: "fits"; up to all of it: "tight"
DEFAULT_CTX = 4096


def engine_estimate_kwargs(settings=None) -> dict:
    """estimate_memory() options matching how the engine creates its context
    (EngineSettings: one unified KV buffer, flash attention auto = on for CPU)."""
    from edge_infer.config import EngineSettings
    from edge_infer.plan.kv_types import type_bytes

    s = settings or EngineSettings()
    return dict(kv_unified=s.kv_unified, flash_attn=s.flash_attn != "off", swa_full=s.swa_full,
                n_batch=s.n_batch, k_type_bytes=type_bytes(s.cache_type_k),
                v_type_bytes=type_bytes(s.cache_type_v), kv_budget=s.kv_budget,
                prompt_cache_bytes=s.prompt_cache_mib * MiB)


def verdict(need: int, available: int) -> str:
    """fits: uses at most 80% of what is free; tight: fits, with little to spare; else does not fit."""
    if available <= 0:
        return NO_FIT
    if need <= available * FIT_MARGIN:
        return FITS
    return TIGHT if need <= available else NO_FIT


@dataclass(frozen=True)
class Fit:
    ctx: int
    parallel: int
    ram_need: int              # everything on the CPU
    ram: str                   # verdict against available RAM
    gpu_need: int | None       # GPU share with every layer offloaded; None without a GPU
    gpu: str | None

    @property
    def best(self) -> str:
        """The better of the two verdicts: a model runs where it fits."""
        order = {FITS: 0, TIGHT: 1, NO_FIT: 2}
        found = [v for v in (self.ram, self.gpu) if v]
        return min(found, key=order.__getitem__)

    def to_dict(self) -> dict:
        return asdict(self)


def fit_verdict(info: ModelInfo, machine: Machine, ctx: int | None = None, parallel: int = 1,
                **estimate_kwargs) -> Fit:
    """Does this model fit this machine at ctx x parallel, in RAM and (all layers) on the GPU?"""
    ctx = ctx or default_ctx(info)
    estimate_kwargs = {**engine_estimate_kwargs(), **estimate_kwargs}
    cpu = estimate_memory(info, ctx, parallel, n_gpu_layers=0, **estimate_kwargs)
    gpu_need = gpu = None
    if machine.gpus:
        on_gpu = estimate_memory(info, ctx, parallel, n_gpu_layers=-1, **estimate_kwargs)
        gpu_need = on_gpu.gpu_bytes
        gpu = verdict(gpu_need, machine.gpu_free)
        if on_gpu.cpu_bytes > machine.ram_available:
            gpu = NO_FIT  # the host share must fit too
    return Fit(ctx, parallel, cpu.total_bytes, verdict(cpu.total_bytes, machine.ram_available), gpu_need, gpu)


def default_ctx(info: ModelInfo) -> int:
    return min(DEFAULT_CTX, info.context_length or DEFAULT_CTX)


@dataclass(frozen=True)
class MemoryPlan:
    """Engine settings chosen for the memory available, with the estimate they give."""

    n_gpu_layers: int          # for llama.cpp: 0 = CPU only, n_layer + 1 = everything
    ctx: int                   # per sequence
    parallel: int
    estimate: MemoryEstimate
    ram_budget: int
    gpu_budget: int
    fits: bool
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        out = asdict(self)
        out["notes"] = list(self.notes)
        return out


def plan_memory(info: ModelInfo, machine: Machine | None = None, *, ctx: int | None = None,
                parallel: int | None = None, max_parallel: int = 1, n_gpu_layers: int | None = None,
                headroom: float = 0.9, min_ctx: int = MIN_CTX_STEP, **estimate_kwargs) -> MemoryPlan:
    """Pick n_gpu_layers, ctx and parallel slots for the memory this machine has free.

    Given values are kept; the rest are chosen: as many layers on the GPU as its budget
    holds (output layer last, as llama.cpp counts them), then the most slots up to
    `max_parallel`, then the longest context up to the one asked for (default
    min(4096, trained)). Budgets are `headroom` of free RAM and free GPU memory.
    When nothing fits, the plan is the smallest configuration with fits=False.
    """
    machine = machine or machines.detect_machine()
    estimate_kwargs = {**engine_estimate_kwargs(), **estimate_kwargs}
    ram_budget = int(machine.ram_available * headroom)
    gpu_budget = int(machine.gpu_free * headroom) if machine.gpu_offload else 0
    want_ctx = ctx or default_ctx(info)
    slots = [parallel] if parallel else list(range(max(1, max_parallel), 0, -1))
    notes: list[str] = []
    if n_gpu_layers and not machine.gpu_offload:
        notes.append("no GPU offload on this machine (or a CPU build of llama.cpp): every layer stays on the CPU")
        n_gpu_layers = 0

    def layers_for(c: int, p: int) -> int:
        if n_gpu_layers is not None:
            return n_gpu_layers
        if gpu_budget <= 0:
            return 0
        return largest_where(0, info.block_count + 1, lambda layers: estimate_memory(
            info, c, p, n_gpu_layers=layers, **estimate_kwargs).gpu_bytes <= gpu_budget)

    def attempt(c: int, p: int) -> tuple[bool, int, MemoryEstimate]:
        layers = layers_for(c, p)
        est = estimate_memory(info, c, p, n_gpu_layers=layers, **estimate_kwargs)
        return est.cpu_bytes <= ram_budget and est.gpu_bytes <= gpu_budget, layers, est

    for p in slots:
        ok, layers, est = attempt(want_ctx, p)
        if ok:
            if p < slots[0]:
                notes.append(f"{p} slots instead of {slots[0]}: more do not fit")
            return MemoryPlan(layers, want_ctx, p, est, ram_budget, gpu_budget, True, tuple(notes))
    p = slots[-1]
    if ctx is None:  # shorten the context until it fits
        best = largest_where(1, max(1, want_ctx // MIN_CTX_STEP), lambda steps: attempt(steps * MIN_CTX_STEP, p)[0])
        if best * MIN_CTX_STEP >= min_ctx:
            c = best * MIN_CTX_STEP
            ok, layers, est = attempt(c, p)
            notes.append(f"context {c} instead of {want_ctx}: a longer one does not fit")
            return MemoryPlan(layers, c, p, est, ram_budget, gpu_budget, True, tuple(notes))
    c = want_ctx if ctx else min(want_ctx, min_ctx)
    ok, layers, est = attempt(c, p)
    notes.append(f"needs {est.cpu_bytes / GiB:.2f} GiB RAM"
                 + (f" and {est.gpu_bytes / GiB:.2f} GiB GPU" if est.gpu_bytes else "")
                 + f"; {ram_budget / GiB:.2f} GiB RAM" + (f", {gpu_budget / GiB:.2f} GiB GPU" if gpu_budget else "")
                 + " can be used")
    return MemoryPlan(layers, c, p, est, ram_budget, gpu_budget, False, tuple(notes))


def plan_settings(info: ModelInfo, settings=None, machine: Machine | None = None, *,
                  ctx: int | None = None, parallel: int | None = None, max_parallel: int = 1,
                  n_gpu_layers: int | None = None):
    """For `serve` and the app: EngineSettings whose ctx / parallel / n_gpu_layers come
    from the plan wherever the caller left them open (None). Returns (settings, plan).

        settings, plan = plan_settings(read_model_info(path), EngineSettings.from_env(),
                                       parallel=args.parallel, max_parallel=8)
        if not plan.fits: warn(plan.notes)
    """
    from dataclasses import replace

    from edge_infer.config import EngineSettings

    settings = settings or EngineSettings.from_env()
    plan = plan_memory(info, machine, ctx=ctx, parallel=parallel, max_parallel=max_parallel,
                       n_gpu_layers=n_gpu_layers, **engine_estimate_kwargs(settings))
    return replace(settings, ctx=plan.ctx, parallel=plan.parallel, n_gpu_layers=plan.n_gpu_layers), plan
