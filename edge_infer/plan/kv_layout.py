"""The KV cache as llama_context lays it out (src/llama-context.cpp, llama-kv-cache-iswa.cpp):
its cells, padded as llama.cpp pads them, and each layer's bytes."""

from __future__ import annotations

from dataclasses import dataclass

from edge_infer.gguf.info import ModelInfo
from edge_infer.plan.estimate_inputs import EstimateInputs
from edge_infer.plan.kv_pool import pool_cells

KV_PAD = 256      # llama.cpp pads n_ctx, n_ctx_seq and the SWA cache to 256 cells


def _pad(n: int, to: int = KV_PAD) -> int:
    return -(-n // to) * to


@dataclass(frozen=True)
class KvLayout:
    """The KV cache as llama_context lays it out: its cells and each layer's bytes."""

    per_token: int                # one more token of context, one sequence (full-attention layers)
    n_ctx: int                    # cells for full-attention layers (all sequences)
    n_ctx_seq: int                # tokens one sequence can hold after padding
    swa_cells: int                # cells per sliding-window layer (all sequences); 0 without SWA
    n_ubatch: int                 # the ubatch, capped by the batch and the context
    span: int                     # the cells one attention reads: the pool when unified
    layer_bytes: tuple[int, ...]  # per layer

    @property
    def bytes(self) -> int:
        return sum(self.layer_bytes)


def kv_layout(inputs: EstimateInputs) -> KvLayout:
    info, ctx, parallel, unified = inputs.info, inputs.ctx, inputs.parallel, inputs.kv_unified
    n_layer = info.block_count
    per_token = int(sum(inputs.cell_bytes(il)
                        for il in range(n_layer) if inputs.swa_full or not info.swa_layers[il]))
    pool = pool_cells(inputs.kv_budget, ctx, parallel, per_token) if unified else None
    n_ctx, n_ctx_seq, streams = _context_cells(ctx, parallel, unified, pool)
    n_batch = min(inputs.n_batch, n_ctx)
    n_ubatch = min(inputs.n_ubatch or n_batch, n_batch)
    full_cells = n_ctx_seq * streams
    swa_cells = 0
    if any(info.swa_layers):
        swa_cells = streams * _swa_cells_per_stream(info, n_ctx_seq, parallel, n_ubatch, inputs.swa_full, unified)
    layer_bytes = tuple(int((swa_cells if info.swa_layers[il] else full_cells) * inputs.cell_bytes(il))
                        for il in range(n_layer))
    return KvLayout(per_token, n_ctx, n_ctx_seq, swa_cells, n_ubatch, n_ctx if unified else n_ctx_seq, layer_bytes)


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

