"""Save and restore one sequence's KV cells (llama_state_seq_get_data / set_data).

The prompt cache (engine/kv/ram_tier.py) keeps these bytes for conversations that lost their
slot; restoring them into a slot costs a copy instead of evaluating the history again.
Engine thread only (the context is not thread-safe).
"""

from __future__ import annotations

import ctypes
import logging

import llama_cpp

from edge_infer.engine.native.context import LlamaContext

log = logging.getLogger("edge_infer.kv_state")


def _view(buf: bytearray):
    return (ctypes.c_ubyte * len(buf)).from_buffer(buf)


def save_sequence(ctx: LlamaContext, seq_id: int, max_bytes: int | None = None) -> bytearray | None:
    """The sequence's cells as bytes (positions, and K and V of every layer), or None when
    it holds nothing, would take more than max_bytes, or llama.cpp could not write them."""
    size = llama_cpp.llama_state_seq_get_size(ctx.handle, seq_id)
    if size <= 0 or (max_bytes is not None and size > max_bytes):
        return None  # not allocated at all: a freed 20 MB buffer can stay in the RSS
    buf = bytearray(size)
    written = llama_cpp.llama_state_seq_get_data(ctx.handle, _view(buf), size, seq_id)
    if written != size:
        log.warning("saving sequence %d wrote %d of %d bytes; not cached", seq_id, written, size)
        return None
    return buf


def restore_sequence(ctx: LlamaContext, seq_id: int, data: bytearray) -> bool:
    """Put saved cells back as sequence seq_id (its old cells are removed first). False when
    the pool has too few free cells or the bytes do not fit this context: the caller then
    evaluates the tokens instead, and the sequence holds nothing."""
    read = llama_cpp.llama_state_seq_set_data(ctx.handle, _view(data), len(data), seq_id)
    if read == 0:
        ctx.seq_rm(seq_id, -1, -1)  # a failed restore may leave part of it
        return False
    return True
