"""What llama.cpp will allocate for a model, from its GGUF header, before it allocates anything.

Mirrors llama.cpp's own sizing (src/llama-context.cpp, llama-kv-cache-iswa.cpp)
so the numbers match what it reports after loading ("KV buffer size", "compute
buffer size"; engine/native/load_report.py reads those back for checking). The parts, each its
own function: the KV cache (plan/kv_layout.py), the compute buffers and the runtime (here),
what the offload devices hold (plan/offload.py); the prompt cache's cap is added to RAM.

`ctx` is per sequence, as in EngineSettings. With one unified KV buffer llama.cpp gets
n_ctx = the pool's cells (plan/kv_pool.py: --kv-budget, default two contexts); with split
buffers n_ctx = ctx * parallel.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from edge_infer.gguf.info import ModelInfo
from edge_infer.plan.estimate_inputs import EstimateInputs
from edge_infer.plan.kv_layout import KvLayout, kv_layout
from edge_infer.plan.offload import layer_devices, offload

__all__ = ["EstimateInputs", "MemoryEstimate", "estimate", "estimate_memory", "layer_devices", "max_context",
           "largest_where", "MIN_CTX_STEP"]

# What a loaded engine holds besides llama.cpp's buffers: llama.cpp's vocabulary tables
# (token text, scores, the text -> id map and the piece cache: ~150 bytes per token) and a
# fixed share for the engine's threads, malloc arenas and Python objects (measured against the
# RSS: tests/plan/test_plan_vs_rss.py).
VOCAB_BYTES_PER_TOKEN = 150
RUNTIME_BYTES = 24 * 1024 * 1024
MIN_CTX_STEP = 256


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


def estimate_memory(info: ModelInfo, ctx: int, parallel: int, **options) -> MemoryEstimate:
    """Bytes llama.cpp will need for `parallel` sequences of `ctx` tokens each; `options`
    are EstimateInputs' fields."""
    return estimate(EstimateInputs(info, ctx, parallel, **options))


def estimate(inputs: EstimateInputs) -> MemoryEstimate:
    """The sum of the parts: KV cache, compute buffers, runtime, the prompt cache's cap, and
    what the offload devices take of them."""
    if inputs.ctx <= 0 or inputs.parallel <= 0:
        raise ValueError("ctx and parallel must be positive")
    info = inputs.info
    kv = kv_layout(inputs)
    compute = compute_buffers(inputs, kv)
    runtime = runtime_bytes(info)
    gpu = offload(inputs, kv, compute.logits)
    weights = info.weights_bytes + gpu.duplicated
    if not gpu.output_on_gpu:
        cpu_compute = compute.resident
    else:  # the rows of logits a step writes, when the CPU computes them
        cpu_compute = 0 if gpu.output_weights_on_gpu else compute.resident - (compute.reserve - compute.logits)
    cpu = (weights + kv.bytes + compute.output + inputs.prompt_cache_bytes + runtime
           - gpu.layer_weights - gpu.layer_kv
           - (info.output_weight_bytes + gpu.duplicated if gpu.output_weights_on_gpu else 0)
           + cpu_compute)
    return MemoryEstimate(
        weights_bytes=weights, kv_bytes=kv.bytes, compute_bytes=compute.reserve,
        compute_resident_bytes=compute.resident, runtime_bytes=runtime, output_bytes=compute.output,
        total_bytes=cpu + gpu.bytes, prompt_cache_bytes=inputs.prompt_cache_bytes,
        kv_bytes_per_token=kv.per_token, n_ctx=kv.n_ctx, n_ctx_seq=kv.n_ctx_seq, swa_cells=kv.swa_cells,
        gpu_layers=gpu.layers, output_on_gpu=gpu.output_on_gpu, gpu_bytes=gpu.bytes, cpu_bytes=cpu,
        device_bytes=gpu.device_bytes, device_compute_bytes=gpu.device_compute if gpu.output_on_gpu else 0,
        device_layers=gpu.device_layers,
    )


@dataclass(frozen=True)
class ComputeBuffers:
    """llama.cpp's compute reservation on the CPU and the part of it a CPU run touches."""

    reserve: int    # the compute buffer llama.cpp reserves (and reports at load)
    resident: int   # the pages a CPU run writes
    logits: int     # n_ubatch rows of logits, the reserve's largest part
    output: int     # the host buffer for the logits handed back to the caller


def compute_buffers(inputs: EstimateInputs, kv: KvLayout) -> ComputeBuffers:
    # Compute buffer (ggml graph scratch), worst case for one ubatch:
    #   logits       n_ubatch * n_vocab * 4        (the reserve assumes every token is an output)
    #   activations  n_ubatch * (3 n_embd + 2 n_ff) * 4   (residual, norm, attn out; ffn gate + up)
    #   attention    n_ubatch * n_head * kv_span * 4 without flash attention (the KQ matrix);
    #                llama.cpp reserves it for 256 cells and grows it as the context fills,
    #                so this is above the size it reports at load but is what it reaches.
    # Measured: SmolLM2 at n_ubatch 512 reports 98-103 MiB (logits alone 96), Gemma 3 514.5 (512).
    info, n_ubatch = inputs.info, kv.n_ubatch
    compute = n_ubatch * info.vocab_size * 4
    compute += n_ubatch * (3 * info.embedding_length + 2 * info.feed_forward_length) * 4
    if not inputs.flash_attn:
        compute += n_ubatch * info.head_count * kv.span * 4
    output = inputs.parallel * info.vocab_size * 4
    # On the CPU the reserve is virtual memory: pages count in the RSS once written. Logits
    # are computed only for the rows asked for (at most one per sequence in a step), so the
    # n_ubatch rows of logits the reserve assumes are never touched. Measured on SmolLM2 and
    # Gemma 3 (tests/plan/test_plan_vs_rss.py): RSS within 4% of this plan with a full pool.
    resident = compute - n_ubatch * info.vocab_size * 4 + min(n_ubatch, inputs.parallel) * info.vocab_size * 4
    return ComputeBuffers(compute, resident, n_ubatch * info.vocab_size * 4, output)


def runtime_bytes(info: ModelInfo) -> int:
    """Vocabulary tables and the engine's threads, arenas and objects."""
    return info.vocab_size * VOCAB_BYTES_PER_TOKEN + RUNTIME_BYTES


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
