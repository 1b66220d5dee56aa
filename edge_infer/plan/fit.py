"""Fit verdicts and the memory plan: which GPU layers, context and slots this machine holds.

Budgets are shares of what is free now (plan.machine); sizes come from plan.estimate,
configured as the engine creates its context (engine_estimate_kwargs: EstimateInputs' options).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from edge_infer.gguf.info import ModelInfo
from edge_infer.plan import machine as machines
from edge_infer.plan.estimate import MIN_CTX_STEP, EstimateInputs, MemoryEstimate, estimate, largest_where
from edge_infer.plan.machine import Machine
from edge_infer.units import GiB, MiB

FITS, TIGHT, NO_FIT = "fits", "tight", "does not fit"
VERDICT_ORDER = {FITS: 0, TIGHT: 1, NO_FIT: 2}  # best first
FIT_MARGIN = 0.80     # at most this share of what is free: "fits"; up to all of it: "tight"
DEFAULT_CTX = 4096


def engine_estimate_kwargs(settings=None, machine: Machine | None = None) -> dict:
    """EstimateInputs' options (estimate_memory's keywords) matching how the engine creates its context
    (EngineSettings: one unified KV buffer, flash attention auto = on for CPU)."""
    from edge_infer.config import EngineSettings
    from edge_infer.plan.cache_sizes import prompt_cache_bytes
    from edge_infer.plan.kv_types import type_bytes

    s = settings or EngineSettings()
    return dict(kv_unified=s.kv_unified, flash_attn=s.flash_attn != "off", swa_full=s.swa_full,
                n_batch=s.n_batch, k_type_bytes=type_bytes(s.cache_type_k),
                v_type_bytes=type_bytes(s.cache_type_v), kv_budget=s.kv_budget,
                # auto: a share of this machine's free RAM (the one the verdict is for)
                prompt_cache_bytes=prompt_cache_bytes(s.prompt_cache_mib, machine.ram_available if machine else None))


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
        found = [v for v in (self.ram, self.gpu) if v]
        return min(found, key=VERDICT_ORDER.__getitem__)

    def to_dict(self) -> dict:
        return asdict(self)


def fit_verdict(info: ModelInfo, machine: Machine, ctx: int | None = None, parallel: int = 1,
                **estimate_kwargs) -> Fit:
    """Does this model fit this machine at ctx x parallel, in RAM and (all layers) on its
    offload devices (split as the plan splits: layer_split)?"""
    ctx = ctx or default_ctx(info)
    inputs = EstimateInputs(info, ctx, parallel, **{**engine_estimate_kwargs(machine=machine), **estimate_kwargs})
    cpu = estimate(replace(inputs, n_gpu_layers=0))
    gpu_need = gpu = None
    devices = machine.devices
    if devices:
        inputs = replace(inputs, max_tensor=devices[-1].max_tensor_bytes)
        split = layer_split(inputs, tuple(d.free_bytes for d in devices))
        on_gpu = estimate(replace(inputs, n_gpu_layers=-1, split=split))
        gpu_need = on_gpu.gpu_bytes
        # The verdict of the tightest device: each must hold its share.
        gpu = max((verdict(need, d.free_bytes) for need, d in zip(on_gpu.device_bytes, devices)),
                  key=VERDICT_ORDER.__getitem__)
        host = on_gpu.cpu_bytes + sum(n for n, d in zip(on_gpu.device_bytes, devices) if d.shares_ram)
        if host > machine.ram_available:
            gpu = NO_FIT  # the host share must fit too
    return Fit(ctx, parallel, cpu.total_bytes, verdict(cpu.total_bytes, machine.ram_available), gpu_need, gpu)


def device_split(free_bytes) -> tuple[float, ...]:
    """Each device's share of the offloaded layers: its free memory (llama.cpp's default)
    or the plan's budget for it."""
    free = tuple(float(max(b, 0)) for b in free_bytes)
    return free if sum(free) > 0 else tuple(1.0 for _ in free)


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
    devices: tuple[str, ...] = ()          # offload devices, llama.cpp's names, in its order
    device_budgets: tuple[int, ...] = ()   # what the plan may put on each
    split: tuple[float, ...] = ()          # llama.cpp's tensor_split for them
    n_layer_slots: int = 0                 # the model's repeating layers + 1 (output)

    def placement(self) -> list[tuple[str, int, int]]:
        """(device, layer slots, bytes) for each device, the CPU first: where each byte goes."""
        on_devices = sum(self.estimate.device_layers)
        rows = [("CPU", self.n_layer_slots - on_devices, self.estimate.cpu_bytes)]
        rows += list(zip(self.devices, self.estimate.device_layers or (0,) * len(self.devices),
                         self.estimate.device_bytes or (0,) * len(self.devices)))
        return rows

    def to_dict(self) -> dict:
        out = asdict(self)
        out["notes"] = list(self.notes)
        out["placement"] = [{"device": d, "layers": n, "bytes": b} for d, n, b in self.placement()]
        return out


def plan_memory(info: ModelInfo, machine: Machine | None = None, *, ctx: int | None = None,
                parallel: int | None = None, max_parallel: int = 1, n_gpu_layers: int | None = None,
                headroom: float = 0.9, min_ctx: int = MIN_CTX_STEP, **estimate_kwargs) -> MemoryPlan:
    """Pick n_gpu_layers, ctx and parallel slots for the memory this machine has free.

    Given values are kept; the rest are chosen: as many layers on the offload devices as
    their budgets hold (output layer last, as llama.cpp counts them; split across devices
    by layer_split), then the most slots up to `max_parallel`, then the
    longest context up to the one asked for (default min(4096, trained)). Budgets are
    `headroom` of free RAM and of each device's free memory; an integrated GPU's bytes
    count against RAM too. When nothing fits, the plan is the smallest configuration
    with fits=False.
    """
    machine = machine or machines.detect_machine()
    devices = machine.devices
    ram_budget = int(machine.ram_available * headroom)
    budgets = tuple(int(d.free_bytes * headroom) for d in devices)
    gpu_budget = sum(budgets)
    want_ctx = ctx or default_ctx(info)
    slots = [parallel] if parallel else list(range(max(1, max_parallel), 0, -1))
    max_tensor = devices[-1].max_tensor_bytes if devices else 0  # the last device computes the logits
    inputs = EstimateInputs(info, want_ctx, slots[0], **{**engine_estimate_kwargs(machine=machine), **estimate_kwargs,
                                                         "max_tensor": max_tensor})
    split = layer_split(inputs, budgets) if devices else (1.0,)
    notes: list[str] = []
    n_slots = info.block_count + 1
    if n_gpu_layers and not devices:
        notes.append("no GPU device (or no GPU backend plug-in): every layer stays on the CPU")
        n_gpu_layers = 0
    if n_gpu_layers is not None and (n_gpu_layers < 0 or n_gpu_layers > n_slots):
        if n_gpu_layers > n_slots:
            notes.append(f"--n-gpu-layers {n_gpu_layers} is more than the model's {n_slots} "
                         f"({info.block_count} layers + output): all {n_slots} offloaded")
        n_gpu_layers = n_slots

    def estimate_at(c: int, p: int, layers: int) -> MemoryEstimate:
        return estimate(replace(inputs, ctx=c, parallel=p, n_gpu_layers=layers, split=split))

    def on_devices(est: MemoryEstimate) -> bool:
        """Each device holds its share; an integrated GPU's share is RAM too."""
        shared = [b for b, d in zip(est.device_bytes, devices) if d.shares_ram]
        return (all(b <= cap for b, cap in zip(est.device_bytes, budgets))
                and (not shared or est.cpu_bytes + sum(shared) <= ram_budget))

    def within(est: MemoryEstimate) -> bool:
        return on_devices(est) and est.cpu_bytes <= ram_budget

    def layers_for(c: int, p: int) -> int:
        if n_gpu_layers is not None:
            return n_gpu_layers
        if gpu_budget <= 0:
            return 0
        return largest_where(0, n_slots, lambda layers: on_devices(estimate_at(c, p, layers)))

    def attempt(c: int, p: int) -> tuple[bool, int, MemoryEstimate]:
        layers = layers_for(c, p)
        est = estimate_at(c, p, layers)
        return within(est), layers, est

    def made(layers: int, c: int, p: int, est: MemoryEstimate, ok: bool) -> MemoryPlan:
        return MemoryPlan(layers, c, p, est, ram_budget, gpu_budget, ok, tuple(notes),
                          tuple(d.name for d in devices), budgets, split if devices else (), n_slots)

    for p in slots:
        ok, layers, est = attempt(want_ctx, p)
        if ok:
            if p < slots[0]:
                notes.append(f"{p} slots instead of {slots[0]}: more do not fit")
            return made(layers, want_ctx, p, est, True)
    p = slots[-1]
    if ctx is None:  # shorten the context until it fits
        best = largest_where(1, max(1, want_ctx // MIN_CTX_STEP), lambda steps: attempt(steps * MIN_CTX_STEP, p)[0])
        if best * MIN_CTX_STEP >= min_ctx:
            c = best * MIN_CTX_STEP
            ok, layers, est = attempt(c, p)
            notes.append(f"context {c} instead of {want_ctx}: a longer one does not fit")
            return made(layers, c, p, est, True)
    c = want_ctx if ctx else min(want_ctx, min_ctx)
    ok, layers, est = attempt(c, p)
    notes.append(shortfall(est, ram_budget, devices, budgets))
    return made(layers, c, p, est, False)


def layer_split(inputs: EstimateInputs, budgets: tuple[int, ...]) -> tuple[float, ...]:
    """Shares of the layers for several devices: what each budget holds once the last device
    (which computes the logits: output weights and the compute buffer) has set that aside.
    A split by free memory alone would overfill a small last device."""
    if len(budgets) < 2:
        return device_split(budgets)
    output = estimate(replace(inputs, n_gpu_layers=1)).gpu_bytes
    room = list(budgets)
    room[-1] = max(room[-1] - output, 0)
    return device_split(room) if sum(room) > 0 else device_split(budgets)


def shortfall(est: MemoryEstimate, ram_budget: int, devices, budgets) -> str:
    """What a plan that does not fit needs, where, against what may be used there."""
    parts = [f"needs {est.cpu_bytes / GiB:.2f} GiB RAM"]
    for d, need, cap in zip(devices, est.device_bytes, budgets):
        if need:
            parts.append(f"{need / GiB:.2f} GiB on {d.name}")
    can = [f"{ram_budget / GiB:.2f} GiB RAM"] + [f"{cap / GiB:.2f} GiB on {d.name}"
                                                  for d, need, cap in zip(devices, est.device_bytes, budgets) if need]
    return " and ".join(parts) + "; " + ", ".join(can) + " can be used"


def plan_for(info: ModelInfo, settings=None, machine: Machine | None = None, *, max_parallel: int = 1,
             **asked) -> MemoryPlan:
    """The one call that makes a model's memory plan from engine settings: ctx, parallel and
    n_gpu_layers as the settings say unless `asked` names them (None: the plan picks), the
    estimate's options as the engine creates its context."""
    from edge_infer.config import EngineSettings

    s = settings or EngineSettings()
    wanted = {"ctx": s.ctx, "parallel": s.parallel, "n_gpu_layers": s.n_gpu_layers, **asked}
    return plan_memory(info, machine, max_parallel=max_parallel, **wanted, **engine_estimate_kwargs(s, machine))


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
    plan = plan_for(info, settings, machine, ctx=ctx, parallel=parallel, n_gpu_layers=n_gpu_layers,
                    max_parallel=max_parallel)
    return replace(settings, ctx=plan.ctx, parallel=plan.parallel, n_gpu_layers=plan.n_gpu_layers), plan
