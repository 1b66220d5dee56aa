"""What a memory estimate is asked for (plan/estimate.py): the model, the context shape and
the options llama.cpp's context is created with."""

from __future__ import annotations

from dataclasses import dataclass

from edge_infer.gguf.info import ModelInfo


@dataclass(frozen=True)
class EstimateInputs:
    """What an estimate is for: `parallel` sequences of `ctx` tokens each, and the context
    options llama.cpp is given.

    n_ubatch defaults to n_batch (the engine decodes whole batches). n_gpu_layers
    counts like llama.cpp: the last N of the n_layer + 1 slots (the output layer is
    the extra slot) go to the GPU; negative = all. KV lives with its layer.
    k_type_bytes / v_type_bytes (bytes per element, plan/kv_types.py) default to kv_type_bytes.
    kv_budget sizes the unified pool (plan/kv_pool.py); prompt_cache_bytes is added to RAM.
    split: the share of offloaded layers each device gets (llama.cpp's tensor_split, in its
    device order); device_bytes says where each byte goes. max_tensor: the largest tensor the
    last device takes (0: no limit).
    """

    info: ModelInfo
    ctx: int
    parallel: int
    n_gpu_layers: int = 0
    kv_type_bytes: float = 2.0
    swa_full: bool = False
    n_batch: int = 512
    n_ubatch: int | None = None
    kv_unified: bool = False
    flash_attn: bool = False
    k_type_bytes: float | None = None
    v_type_bytes: float | None = None
    kv_budget: str = ""
    prompt_cache_bytes: int = 0
    split: tuple[float, ...] = (1.0,)
    max_tensor: int = 0

    def cell_bytes(self, il: int) -> float:
        """Bytes of one KV cell of layer il (keys and values at their own types)."""
        kb = self.kv_type_bytes if self.k_type_bytes is None else self.k_type_bytes
        vb = self.kv_type_bytes if self.v_type_bytes is None else self.v_type_bytes
        info = self.info
        return info.layer_head_count_kv[il] * (info.key_length * kb + info.value_length * vb)

