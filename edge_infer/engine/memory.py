"""Memory plan from a GGUF header, before llama.cpp allocates anything.

Mirrors llama.cpp's own sizing (src/llama-context.cpp, llama-kv-cache-iswa.cpp)
so the numbers match what it reports after loading ("KV buffer size", "compute
buffer size"; engine/load_report.py reads those back for checking).

`ctx` is per sequence, as in EngineSettings: llama.cpp gets n_ctx = ctx * parallel.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from edge_infer.store.gguf_info import ModelInfo

MiB = 1024 * 1024
KV_PAD = 256      # llama.cpp pads n_ctx, n_ctx_seq and the SWA cache to 256 cells
MIN_CTX_STEP = 256


def _pad(n: int, to: int = KV_PAD) -> int:
    return -(-n // to) * to


@dataclass(frozen=True)
class MemoryEstimate:
    weights_bytes: int
    kv_bytes: int
    compute_bytes: int
    output_bytes: int          # host buffer for logits handed back to the caller
    total_bytes: int
    kv_bytes_per_token: int    # one more token of context, one sequence (full-attention layers)
    n_ctx: int                 # KV cells llama.cpp will allocate for full-attention layers (all sequences)
    n_ctx_seq: int             # tokens one sequence can hold after llama.cpp's padding
    swa_cells: int             # cells per sliding-window layer (all sequences); 0 without SWA
    gpu_layers: int            # repeating layers placed on the GPU
    output_on_gpu: bool
    gpu_bytes: int
    cpu_bytes: int

    def to_dict(self) -> dict:
        return asdict(self)


def _context_cells(ctx: int, parallel: int, kv_unified: bool) -> tuple[int, int, int]:
    """(n_ctx, n_ctx_seq, streams) as llama_context pads them: n_ctx to 256, then
    per sequence to 256 again unless one unified buffer serves all sequences."""
    n_ctx = _pad(ctx * parallel)
    if kv_unified:
        return n_ctx, n_ctx, 1
    n_ctx_seq = _pad(n_ctx // parallel)
    return n_ctx_seq * parallel, n_ctx_seq, parallel


def _swa_cells_per_stream(info: ModelInfo, n_ctx_seq: int, parallel: int, n_ubatch: int,
                          swa_full: bool, kv_unified: bool) -> int:
    """iSWA cache: the window of each sequence sharing the stream, plus room for one
    ubatch, never more than the full cache, padded to 256 (llama-kv-cache-iswa.cpp)."""
    if swa_full:
        return n_ctx_seq
    window = info.sliding_window * (parallel if kv_unified else 1)
    return _pad(min(n_ctx_seq, window + n_ubatch))


def _layer_kv_width(info: ModelInfo, il: int) -> int:
    return info.layer_head_count_kv[il] * (info.key_length + info.value_length)


def estimate_memory(info: ModelInfo, ctx: int, parallel: int, n_gpu_layers: int = 0,
                    kv_type_bytes: float = 2.0, swa_full: bool = False, n_batch: int = 512,
                    *, n_ubatch: int | None = None, kv_unified: bool = False,
                    flash_attn: bool = False) -> MemoryEstimate:
    """Bytes llama.cpp will need for `parallel` sequences of `ctx` tokens each.

    n_ubatch defaults to n_batch (the engine decodes whole batches). n_gpu_layers
    counts like llama.cpp: the last N of the n_layer + 1 slots (the output layer is
    the extra slot) go to the GPU; negative = all. KV lives with its layer.
    """
    if ctx <= 0 or parallel <= 0:
        raise ValueError("ctx and parallel must be positive")
    n_layer = info.block_count
    n_ctx, n_ctx_seq, streams = _context_cells(ctx, parallel, kv_unified)
    n_batch = min(n_batch, n_ctx)
    n_ubatch = min(n_ubatch or n_batch, n_batch)
    full_cells = n_ctx_seq * streams
    swa_cells = 0
    if any(info.swa_layers):
        swa_cells = streams * _swa_cells_per_stream(
            info, n_ctx_seq, parallel, n_ubatch, swa_full, kv_unified)

    slots = n_layer + 1 if n_gpu_layers < 0 else min(n_gpu_layers, n_layer + 1)
    first_gpu = n_layer + 1 - slots
    output_on_gpu = slots > 0

    kv_layers = []
    for il in range(n_layer):
        cells = swa_cells if info.swa_layers[il] else full_cells
        kv_layers.append(int(cells * _layer_kv_width(info, il) * kv_type_bytes))
    kv_bytes = sum(kv_layers)
    kv_per_token = int(sum(_layer_kv_width(info, il) * kv_type_bytes
                           for il in range(n_layer) if swa_full or not info.swa_layers[il]))

    # Compute buffer (ggml graph scratch), worst case for one ubatch:
    #   logits       n_ubatch * n_vocab * 4        (the reserve assumes every token is an output)
    #   activations  n_ubatch * (3 n_embd + 2 n_ff) * 4   (residual, norm, attn out; ffn gate + up)
    #   attention    n_ubatch * n_head * kv_span * 4 without flash attention (the KQ matrix);
    #                llama.cpp reserves it for 256 cells and grows it as the context fills,
    #                so this is above the size it reports at load but is what it reaches.
    # Measured: SmolLM2 at n_ubatch 512 reports 98-103 MiB (logits alone 96), Gemma 3 514.5 (512).
    kv_span = n_ctx if kv_unified else n_ctx_seq
    compute = n_ubatch * info.vocab_size * 4
    compute += n_ubatch * (3 * info.embedding_length + 2 * info.feed_forward_length) * 4
    if not flash_attn:
        compute += n_ubatch * info.head_count * kv_span * 4
    output = parallel * info.vocab_size * 4

    gpu_layer_weights = sum(info.layer_weight_bytes[first_gpu:])
    gpu_kv = sum(kv_layers[first_gpu:])
    # Tied embeddings: a GPU output layer gets its own copy of token_embd (the input
    # layer always stays on the CPU), so those bytes count twice.
    duplicated = info.input_weight_bytes if output_on_gpu and info.tied_embeddings else 0
    gpu = gpu_layer_weights + gpu_kv
    if output_on_gpu:
        gpu += info.output_weight_bytes + duplicated + compute
    weights = info.weights_bytes + duplicated
    total = weights + kv_bytes + compute + output
    cpu = total - gpu
    return MemoryEstimate(
        weights_bytes=weights, kv_bytes=kv_bytes, compute_bytes=compute, output_bytes=output,
        total_bytes=total, kv_bytes_per_token=kv_per_token, n_ctx=n_ctx, n_ctx_seq=n_ctx_seq,
        swa_cells=swa_cells, gpu_layers=n_layer - min(first_gpu, n_layer), output_on_gpu=output_on_gpu,
        gpu_bytes=gpu, cpu_bytes=cpu,
    )


def _largest(lo: int, hi: int, ok) -> int:
    """The largest x in [lo, hi] with ok(x), for ok true up to some point and false after
    it (memory grows with context, slots and GPU layers): a binary search. 0 if none."""
    best = 0
    while lo <= hi:
        mid = (lo + hi) // 2
        if ok(mid):
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    return best


def max_context(info: ModelInfo, budget_bytes: int, parallel: int = 1, **kwargs) -> int:
    """Largest per-sequence context (a multiple of 256, at most the trained context)
    whose estimate fits in budget_bytes; 0 when not even 256 tokens fit."""
    def fits(steps: int) -> bool:
        return estimate_memory(info, steps * MIN_CTX_STEP, parallel, **kwargs).total_bytes <= budget_bytes

    return _largest(1, max(1, info.context_length // MIN_CTX_STEP), fits) * MIN_CTX_STEP


# ---- the machine and the plan ------------------------------------------------------------
#
# Seams (ollama's sched.go style): detect_machine() reads this machine, but every decision
# below takes a Machine, so tests and `--ram`-style overrides hand in any machine they like.

GiB = 1024 * MiB
FITS, TIGHT, NO_FIT = "fits", "tight", "does not fit"
FIT_MARGIN = 0.80     # at most this share of what is free: "fits"; up to all of it: "tight"
DEFAULT_CTX = 4096


@dataclass(frozen=True)
class GpuDevice:
    name: str
    total_bytes: int
    free_bytes: int


@dataclass(frozen=True)
class Machine:
    ram_total: int
    ram_available: int
    gpus: tuple[GpuDevice, ...] = ()
    gpu_offload: bool = False   # the llama.cpp build can offload layers (a GPU build)

    @property
    def gpu_free(self) -> int:
        return sum(g.free_bytes for g in self.gpus)

    @property
    def gpu_total(self) -> int:
        return sum(g.total_bytes for g in self.gpus)

    def describe(self) -> str:
        parts = [f"{self.ram_available / GiB:.1f} of {self.ram_total / GiB:.1f} GiB RAM available"]
        for g in self.gpus:
            parts.append(f"{g.name}: {g.free_bytes / GiB:.1f} of {g.total_bytes / GiB:.1f} GiB free")
        if self.gpus and not self.gpu_offload:
            parts.append("(this llama.cpp build is CPU-only: rebuild with CUDA to use the GPU)")
        if not self.gpus:
            parts.append("no GPU")
        return ", ".join(parts)


def query_nvidia_gpus(timeout: float = 5.0) -> tuple[GpuDevice, ...]:
    """GPUs nvidia-smi reports, or () when there is none (or no driver)."""
    import shutil
    import subprocess

    exe = shutil.which("nvidia-smi")
    if not exe:
        return ()
    try:
        out = subprocess.run([exe, "--query-gpu=name,memory.total,memory.free",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True,
                             timeout=timeout, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    return parse_nvidia_smi(out)


def parse_nvidia_smi(text: str) -> tuple[GpuDevice, ...]:
    gpus = []
    for line in text.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 3:
            continue
        try:
            gpus.append(GpuDevice(parts[0], int(float(parts[1]) * MiB), int(float(parts[2]) * MiB)))
        except ValueError:
            continue
    return tuple(gpus)


def _llama_can_offload() -> bool:
    try:
        import llama_cpp

        return bool(llama_cpp.llama_supports_gpu_offload())
    except Exception:  # no llama_cpp at all: nothing can be offloaded
        return False


def detect_machine(gpu_query=query_nvidia_gpus, can_offload=_llama_can_offload) -> Machine:
    import psutil

    vm = psutil.virtual_memory()
    gpus = gpu_query()
    return Machine(ram_total=vm.total, ram_available=vm.available, gpus=gpus,
                   gpu_offload=bool(gpus) and can_offload())


def engine_estimate_kwargs(settings=None) -> dict:
    """estimate_memory() options matching how the engine creates its context
    (EngineSettings: one unified KV buffer, flash attention auto = on for CPU)."""
    from edge_infer.config import EngineSettings

    s = settings or EngineSettings()
    return dict(kv_unified=s.kv_unified, flash_attn=s.flash_attn != "off", swa_full=s.swa_full,
                n_batch=s.n_batch)


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
    machine = machine or detect_machine()
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
        return _largest(0, info.block_count + 1, lambda layers: estimate_memory(
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
        best = _largest(1, max(1, want_ctx // MIN_CTX_STEP), lambda steps: attempt(steps * MIN_CTX_STEP, p)[0])
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
