"""Settings checked, then the model and its context loaded as the memory plan places them.

Everything here runs once, before the engine thread starts; a bad setting fails with its
reason before llama.cpp sees it (llama.cpp aborts the process on some)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from edge_infer.config import EngineSettings
from edge_infer.engine.devices.placement import Placement, load_model, place
from edge_infer.engine.native.context import ContextParams, LlamaContext
from edge_infer.engine.native.llama import LlamaModel, capture_log
from edge_infer.engine.native.load_report import device_buffers, kv_bytes_reported
from edge_infer.engine.speculation import check_draft_max
from edge_infer.errors import EdgeInferError
from edge_infer.gguf.info import ModelInfo
from edge_infer.plan.kv_types import check_kv_types, ggml_type

log = logging.getLogger("edge_infer.engine")


def check_settings(s: EngineSettings) -> None:
    check_kv_types(s.cache_type_k, s.cache_type_v, s.flash_attn)
    check_draft_max(s.draft_max)
    if not -1 <= s.poll <= 100:
        raise EdgeInferError(f"--poll must be -1 (no persistent threadpool) or 0..100, not {s.poll}")
    s.check_sizes()
    if s.kv_budget and not s.kv_unified:
        raise EdgeInferError("--kv-budget sizes the shared KV pool: drop --kv-split")


@dataclass
class Loaded:
    placement: Placement
    model: LlamaModel
    ctx: LlamaContext
    load_log: list[str]                   # llama.cpp's log of the load
    buffers: dict[str, dict[str, int]]    # its report of its buffers, by device
    kv_bytes: int                         # the KV bytes it allocated
    n_ctx_seq: int                        # what one sequence may hold


def load(model_path: Path, info: ModelInfo, s: EngineSettings) -> Loaded:
    """The memory plan sizes the pool (--kv-budget, default two contexts) and places the layers
    on llama.cpp's devices: one source of truth for `inspect`, the fit verdicts and llama.cpp."""
    placement = place(info, s)
    plan = placement.plan.estimate
    with capture_log() as load_log:
        model = load_model(model_path, placement, load_log)
        ctx = LlamaContext(model, ContextParams(
            n_ctx=plan.n_ctx, n_seq_max=s.parallel, n_batch=s.n_batch,
            n_threads=s.n_threads, kv_unified=s.kv_unified, swa_full=s.swa_full,
            flash_attn=s.flash_attn, type_k=ggml_type(s.cache_type_k),
            type_v=ggml_type(s.cache_type_v), poll=s.poll, op_offload=placement.n_gpu_layers != 0))
    # What one sequence may hold: `ctx`, or the whole pool when it is smaller.
    n_ctx_seq = min(s.ctx, ctx.n_ctx_seq)
    if n_ctx_seq < s.ctx:
        log.warning("the KV pool holds %d cells, fewer than --ctx %d: each request is capped at %d",
                    ctx.n_ctx, s.ctx, n_ctx_seq)
    return Loaded(placement, model, ctx, load_log, device_buffers(load_log), kv_bytes_reported(load_log), n_ctx_seq)
