"""What llama.cpp will allocate for a model, from its GGUF header, before it allocates anything.

Mirrors llama.cpp's own sizing (src/llama-context.cpp, llama-kv-cache-iswa.cpp)
so the numbers match what it reports after loading ("KV buffer size", "compute
buffer size"; engine/native/load_report.py reads those back for checking).

`ctx` is per sequence, as in EngineSettings. With one unified KV buffer llama.cpp gets
n_ctx = the pool's cells (plan/kv_pool.py: --kv-budget, default two contexts); with split
buffers n_ctx = ctx * parallel.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from edge_infer.gguf.info import ModelInfo
from edge_infer.plan.kv_pool import pool_cells

# What a loaded engine holds besides llama.cpp's buffers: llama.cpp's vocabulary tables
# (token text, scores, the text -> id map and the piece cache: ~150 bytes per token) and a
# fixed share for the engine's threads, malloc arenas and Python objects (measured, see above).
VOCAB_BYTES_PER_TOKEN = 150
RUNTIME_BYTES = 24 * 1024 * 1024
KV_PAD = 256      # llama.cpp pads n_ctx, n_ctx_seq and the SWA cache to 256 cells
MIN_CTX_STEP = 256


def _pad(n: int, to: int = KV_PAD) -> int:
    return -(-n // to) * to


@dataclass(frozen=True)
class MemoryEstimate:
    weights_bytes: int
    kv_bytes: int
    compute_bytes: int         # the compute buffer llama.cpp reserves on the CPU (and reports at load)
    compute_resident_bytes: int  # the part of it a CPU run touches (logits rows of real outputs)
    runtime_bytes: int         # vocab tables and the engine's threads, arenas and objects
    output_bytes: int          # host buffer for logits handed back to the caller
    total_bytes: int           # everything, the prompt cache's cap included
    prompt_cache_bytes: int    # cap of the RAM cache of saved sequence states
    kv_bytes_per_token: int    # one more token of context, one sequence (full-attention layers)
    n_ctx: int                 # KV cells llama.cpp will allocate for full-attention layers (all sequences)
    n_ctx_seq: int             # tokens one sequence can hold after llama.cpp's padding
    swa_cells: int             # cells per sliding-window layer (all sequences); 0 without SWA
    gpu_layers: int            # repeating layers placed on the GPU
    output_on_gpu: bool
    gpu_bytes: int
    cpu_bytes: int
    device_bytes: tuple[int, ...] = ()   # gpu_bytes by offload device, in the split's order
    device_compute_bytes: int = 0        # the compute buffer of the device holding the output layer
    device_layers: tuple[int, ...] = ()  # layer slots (repeating + output) on each of them

    def to_dict(self) -> dict:
        return asdict(self)


def _context_cells(ctx: int, parallel: int, kv_unified: bool,
                   pool: int | None = None) -> tuple[int, int, int]:
    """(n_ctx, n_ctx_seq, streams) as llama_context pads them: n_ctx to 256, then
    per sequence to 256 again unless one unified buffer (of `pool` cells) serves all sequences."""
    if kv_unified:
        n_ctx = _pad(pool or ctx * parallel)
        return n_ctx, n_ctx, 1
    n_ctx = _pad(ctx * parallel)
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
                    flash_attn: bool = False, k_type_bytes: float | None = None,
                    v_type_bytes: float | None = None, kv_budget: str = "",
                    prompt_cache_bytes: int = 0, split: tuple[float, ...] = (1.0,),
                    max_tensor: int = 0) -> MemoryEstimate:
    """Bytes llama.cpp will need for `parallel` sequences of `ctx` tokens each.

    n_ubatch defaults to n_batch (the engine decodes whole batches). n_gpu_layers
    counts like llama.cpp: the last N of the n_layer + 1 slots (the output layer is
    the extra slot) go to the GPU; negative = all. KV lives with its layer.
    k_type_bytes / v_type_bytes (bytes per element, plan/kv_types.py) default to kv_type_bytes.
    kv_budget sizes the unified pool (plan/kv_pool.py); prompt_cache_bytes is added to RAM.
    split: the share of offloaded layers each device gets (llama.cpp's tensor_split, in its
    device order); device_bytes says where each byte goes.
    """
    if ctx <= 0 or parallel <= 0:
        raise ValueError("ctx and parallel must be positive")
    n_layer = info.block_count
    kb = kv_type_bytes if k_type_bytes is None else k_type_bytes
    vb = kv_type_bytes if v_type_bytes is None else v_type_bytes

    def width(il: int) -> float:
        return info.layer_head_count_kv[il] * (info.key_length * kb + info.value_length * vb)

    kv_per_token = int(sum(width(il)
                           for il in range(n_layer) if swa_full or not info.swa_layers[il]))
    pool = pool_cells(kv_budget, ctx, parallel, kv_per_token) if kv_unified else None
    n_ctx, n_ctx_seq, streams = _context_cells(ctx, parallel, kv_unified, pool)
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
        kv_layers.append(int(cells * width(il)))
    kv_bytes = sum(kv_layers)

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
    # On the CPU the reserve is virtual memory: pages count in the RSS once written. Logits
    # are computed only for the rows asked for (at most one per sequence in a step), so the
    # n_ubatch rows of logits the reserve assumes are never touched. Measured on SmolLM2 and
    # Gemma 3 (tests/plan/test_plan_vs_rss.py): RSS within 4% of this plan with a full pool.
    compute_resident = compute - n_ubatch * info.vocab_size * 4 + min(n_ubatch, parallel) * info.vocab_size * 4
    runtime = info.vocab_size * VOCAB_BYTES_PER_TOKEN + RUNTIME_BYTES

    gpu_layer_weights = sum(info.layer_weight_bytes[first_gpu:])
    gpu_kv = sum(kv_layers[first_gpu:])
    logits = n_ubatch * info.vocab_size * 4
    # llama.cpp places the output matrix where the device supports a 512-row product with it;
    # a device that refuses tensors past max_tensor (Vulkan: maxStorageBufferRange, 128 MiB on
    # llvmpipe) keeps that matrix, and so the logits, on the CPU.
    output_matrix = info.input_weight_bytes if info.tied_embeddings else info.output_weight_bytes
    too_big = max_tensor and max(output_matrix, 512 * info.vocab_size * 4) > max_tensor
    output_weights_on_gpu = output_on_gpu and not too_big
    # Tied embeddings: a GPU output layer gets its own copy of token_embd (the input
    # layer always stays on the CPU), so those bytes count twice.
    duplicated = info.input_weight_bytes if output_weights_on_gpu and info.tied_embeddings else 0
    # On a device the whole compute reservation is allocated: its peak, which is the logits
    # (with the residual) where the device computes them, else the layers' activations with
    # the f16 attention masks (one per attention kind). Measured on Vulkan with flash
    # attention: SmolLM2 98.2 MiB (plan 98.25), Gemma 3 23.0 (23.2), Qwen2.5-1.5B 62.5 (62.5).
    masks = (2 if any(info.swa_layers) else 1) * kv_span * n_ubatch * 2
    layer_compute = n_ubatch * (3 * info.feed_forward_length + 2 * info.embedding_length) * 4 + masks
    if not flash_attn:
        layer_compute += n_ubatch * info.head_count * kv_span * 4
    device_compute = layer_compute
    if output_weights_on_gpu:
        device_compute = max(logits + n_ubatch * 2 * info.embedding_length * 4, layer_compute)
    gpu_output = 0
    if output_weights_on_gpu:
        gpu_output = info.output_weight_bytes + duplicated + device_compute
    elif output_on_gpu:  # the layers' activations on the device, the logits on the CPU
        gpu_output = device_compute
    gpu = gpu_layer_weights + gpu_kv + gpu_output
    owner = layer_devices(n_layer, slots, split)
    per_device = [0] * len(split)
    per_layers = [0] * len(split)
    for il, dev in enumerate(owner):
        if dev is None:
            continue
        per_layers[dev] += 1
        if il < n_layer:
            per_device[dev] += info.layer_weight_bytes[il] + kv_layers[il]
        else:  # the output layer, with the compute buffer of the device that computes logits
            per_device[dev] += gpu_output
    weights = info.weights_bytes + duplicated
    if not output_on_gpu:
        cpu_compute = compute_resident
    else:  # the rows of logits a step writes, when the CPU computes them
        cpu_compute = 0 if output_weights_on_gpu else compute_resident - (compute - logits)
    cpu = (weights + kv_bytes + output + prompt_cache_bytes + runtime
           - gpu_layer_weights - gpu_kv - (info.output_weight_bytes + duplicated if output_weights_on_gpu else 0)
           + cpu_compute)
    total = cpu + gpu
    return MemoryEstimate(
        weights_bytes=weights, kv_bytes=kv_bytes, compute_bytes=compute,
        compute_resident_bytes=compute_resident, runtime_bytes=runtime, output_bytes=output,
        total_bytes=total, prompt_cache_bytes=prompt_cache_bytes, kv_bytes_per_token=kv_per_token, n_ctx=n_ctx, n_ctx_seq=n_ctx_seq,
        swa_cells=swa_cells, gpu_layers=n_layer - min(first_gpu, n_layer), output_on_gpu=output_on_gpu,
        gpu_bytes=gpu, cpu_bytes=cpu, device_bytes=tuple(per_device) if slots else (),
        device_compute_bytes=device_compute if output_on_gpu else 0,
        device_layers=tuple(per_layers) if slots else (),
    )


def layer_devices(n_layer: int, slots: int, split: tuple[float, ...]) -> list[int | None]:
    """Which offload device holds each of the n_layer + 1 layer slots (the output layer is
    the last), None for the CPU: llama.cpp's rule (llama-model.cpp, load_tensors) -- the last
    `slots` go to the devices, cut at the cumulative shares of `split`."""
    total = sum(split) or 1.0
    bounds, acc = [], 0.0
    for share in split:
        acc += share
        bounds.append(acc / total)
    first = n_layer + 1 - slots
    owner: list[int | None] = []
    for il in range(n_layer + 1):
        if il < first or slots == 0:
            owner.append(None)
            continue
        frac = (il - first) / slots
        owner.append(min(next((i for i, b in enumerate(bounds) if b > frac), len(bounds) - 1), len(bounds) - 1))
    return owner


def largest_where(lo: int, hi: int, ok) -> int:
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

    return largest_where(1, max(1, info.context_length // MIN_CTX_STEP), fits) * MIN_CTX_STEP
