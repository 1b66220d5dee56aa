"""Owners of a llama_context (the KV cache and the compute graph) and of a llama_batch,
in the manner of llama-cpp-python's `_internals.py`: one class, one handle, freed once."""

from __future__ import annotations

from dataclasses import dataclass

import llama_cpp

from edge_infer.engine.native.llama import LlamaModel
from edge_infer.engine.native.threadpool import CpuThreadpools


@dataclass(frozen=True)
class ContextParams:
    n_ctx: int          # total KV cells across all sequences
    n_seq_max: int
    n_batch: int
    n_threads: int
    kv_unified: bool = False
    swa_full: bool = False
    flash_attn: str = "auto"  # auto | on | off
    type_k: int = 1           # ggml type ids of the KV cache (1 = f16; plan/kv_types.py)
    type_v: int = 1
    poll: int = 50            # CPU threadpool polling; -1 = none attached (engine/native/threadpool.py)
    # llama.cpp runs large-batch ops of CPU-held weights on a GPU when one is loaded, even with
    # no layer offloaded; off when the user asked for the CPU alone (--n-gpu-layers 0).
    op_offload: bool = True


class LlamaContext:
    """One llama_context: the KV cache and the compute graph. Used by one thread only."""

    def __init__(self, model: LlamaModel, p: ContextParams):
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = p.n_ctx
        params.n_batch = p.n_batch
        params.n_ubatch = p.n_batch
        params.n_seq_max = p.n_seq_max
        params.n_threads = p.n_threads
        params.n_threads_batch = p.n_threads
        params.kv_unified = p.kv_unified
        params.swa_full = p.swa_full
        params.op_offload = p.op_offload
        params.type_k, params.type_v = p.type_k, p.type_v
        params.flash_attn_type = {"on": llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED,
                                  "off": llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED}.get(
                                      p.flash_attn, llama_cpp.LLAMA_FLASH_ATTN_TYPE_AUTO)
        params.no_perf = True
        self.model = model  # keep the model alive as long as the context
        self.handle = llama_cpp.llama_init_from_model(model.handle, params)
        if not self.handle:
            raise RuntimeError("llama.cpp could not create a context (out of memory?)")
        self.memory = llama_cpp.llama_get_memory(self.handle)
        self.n_ctx = llama_cpp.llama_n_ctx(self.handle)
        self.n_ctx_seq = llama_cpp.llama_n_ctx_seq(self.handle)
        self.threadpool = CpuThreadpools(self.handle, p.n_threads if p.poll >= 0 else 0, p.poll)

    def decode(self, batch: "LlamaBatch") -> int:
        batch.handle.n_tokens = batch.n  # once per step, not once per added token
        return llama_cpp.llama_decode(self.handle, batch.handle)

    def logits_ptr(self, i: int):
        return llama_cpp.llama_get_logits_ith(self.handle, i)

    def set_poll(self, poll: int) -> None:
        """Compute on the threadpool whose workers spin `poll` before sleeping (engine/cpu_share.py)."""
        self.threadpool.use(poll)

    def set_threads(self, n: int) -> None:
        """Decode (and prefill) on n threads from the next llama_decode on."""
        llama_cpp.llama_set_n_threads(self.handle, n, n)

    def seq_rm(self, seq: int, p0: int, p1: int = -1) -> bool:
        return bool(llama_cpp.llama_memory_seq_rm(self.memory, seq, p0, p1))

    def seq_cp(self, src: int, dst: int, p0: int, p1: int) -> None:
        """Let `dst` see `src`'s cells at positions [p0, p1). Only on a unified KV cache:
        across split streams llama.cpp asserts (aborts) unless the whole buffer is copied."""
        llama_cpp.llama_memory_seq_cp(self.memory, src, dst, p0, p1)

    def seq_pos_min(self, seq: int) -> int:
        return llama_cpp.llama_memory_seq_pos_min(self.memory, seq)

    def seq_pos_max(self, seq: int) -> int:
        """The highest position `seq` holds in the KV cache (-1: none)."""
        return llama_cpp.llama_memory_seq_pos_max(self.memory, seq)

    def close(self) -> None:
        if getattr(self, "handle", None):
            pools = getattr(self, "threadpool", None)
            if pools:
                pools.detach()
            llama_cpp.llama_free(self.handle)
            self.handle = None
            if pools:
                pools.close()  # after the context: nothing can compute on them any more

    __del__ = close


class LlamaBatch:
    """A llama_batch with room for `capacity` tokens, one sequence id each."""

    def __init__(self, capacity: int):
        self.handle = llama_cpp.llama_batch_init(capacity, 0, 1)
        self.capacity, self.n = capacity, 0
        # Struct field access builds a new pointer object each time: cache them.
        b = self.handle
        self._token, self._pos, self._logits = b.token, b.pos, b.logits
        self._n_seq_id = b.n_seq_id
        self._seq_id = [b.seq_id[i] for i in range(capacity)]

    def clear(self) -> None:
        self.n = 0

    def add(self, token: int, pos: int, seq: int, want_logits: bool) -> int:
        """Append a token; returns its index (the row of its logits when wanted)."""
        i = self.n
        self._token[i] = token
        self._pos[i] = pos
        self._n_seq_id[i] = 1
        self._seq_id[i][0] = seq
        self._logits[i] = want_logits
        self.n = i + 1
        return i

    def close(self) -> None:
        if getattr(self, "handle", None) is not None:
            llama_cpp.llama_batch_free(self.handle)
            self.handle = None

    __del__ = close
