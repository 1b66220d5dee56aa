"""Owners of llama.cpp C handles: model, context, batch, sampler chain.

Each class owns exactly one handle and frees it exactly once (close() or GC), in the
manner of llama-cpp-python's `_internals.py`. Nothing here knows about requests.
"""

from __future__ import annotations

import ctypes
import logging
import math
import threading
from dataclasses import dataclass
from pathlib import Path

import llama_cpp
import numpy as np

from edge_infer.engine.threadpool import CpuThreadpools

log = logging.getLogger("edge_infer.llama")
# llama_token_data {llama_token id; float logit; float p;}, as a numpy record for bulk copies.
_TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])

_backend_lock = threading.Lock()
_backend_info = None  # the BackendInfo, once init_backend has loaded the CPU backend
# llama.cpp logs through one process-wide callback: capture_log() collects the lines of a
# load (buffer sizes are read back from them); everything goes to logging at DEBUG.
_captures: list[list[str]] = []


class capture_log:
    """Collect llama.cpp's log lines written while the block runs (load-time reports)."""

    def __enter__(self) -> list[str]:
        self.lines: list[str] = []
        _captures.append(self.lines)
        return self.lines

    def __exit__(self, *exc) -> None:
        _captures.remove(self.lines)


@llama_cpp.llama_log_callback
def _log_callback(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
    line = text.decode("utf-8", errors="replace")
    for lines in _captures:
        lines.append(line)
    if log.isEnabledFor(logging.DEBUG):
        log.debug(line.rstrip())


def init_backend(gpus: bool = True):
    """Once per process, before any model: load ggml's backends (the CPU variant chosen for
    this CPU, see engine/cpu.py; with `gpus`, the GPU plug-ins this machine can use, once: a
    CPU-only caller passes False) and decide extra buffer types. Returns the BackendInfo.
    Raises EdgeInferError for a bad EDGE_INFER_CPU_VARIANT / EDGE_INFER_EXTRA_BUFTS."""
    global _backend_info
    with _backend_lock:
        from edge_infer.engine import backend, cpu

        if _backend_info is None:
            llama_cpp.llama_log_set(_log_callback, ctypes.c_void_p(0))
            info = backend.load_backends(*cpu.settings_from_env())
            llama_cpp.llama_backend_init()
            if not info.use_extra_bufts:
                _default_params_without_extra_bufts()
            log.info("llama.cpp backend: %s (%s)", info.summary(), info.extra_bufts_reason)
            _backend_info = info
        if gpus and not _backend_info.gpus_probed:
            backend.load_gpu_plugins(_backend_info)
        return _backend_info


def _default_params_without_extra_bufts() -> None:
    # llama_cpp.Llama (the bench and loadtest baselines) builds its model params from
    # llama_model_default_params() with no way to pass use_extra_bufts: patch the default
    # once, so every llama.cpp model this process opens follows the same decision.
    original = llama_cpp.llama_cpp.llama_model_default_params

    def default_params():
        params = original()
        params.use_extra_bufts = False
        return params

    llama_cpp.llama_cpp.llama_model_default_params = default_params
    llama_cpp.llama_model_default_params = default_params


class ModelLoadError(RuntimeError):
    """llama_model_load_from_file returned NULL (out of device memory, a bad file, ...)."""


class LlamaModel:
    """A loaded GGUF model (weights + vocab). Read-only after load; shareable across threads
    for tokenizing."""

    def __init__(self, path: Path, n_gpu_layers: int = 0, vocab_only: bool = False,
                 tensor_split: tuple[float, ...] = ()):
        info = init_backend(gpus=bool(n_gpu_layers) and not vocab_only)
        params = llama_cpp.llama_model_default_params()
        params.use_extra_bufts = info.use_extra_bufts
        params.n_gpu_layers = n_gpu_layers
        if tensor_split:  # llama.cpp reads llama_max_devices() floats; keep them alive with the model
            self._split = (ctypes.c_float * llama_cpp.llama_max_devices())(*tensor_split)
            params.tensor_split = self._split
        params.vocab_only = vocab_only
        self.backend = info  # which CPU variant and buffer types this model runs on
        self.path = Path(path)
        self.handle = llama_cpp.llama_model_load_from_file(str(self.path).encode(), params)
        if not self.handle:
            raise ModelLoadError(f"llama.cpp could not load {self.path} (run with -v for its log)")
        self.vocab = llama_cpp.llama_model_get_vocab(self.handle)
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(self.vocab)
        self.n_swa = llama_cpp.llama_model_n_swa(self.handle)
        # Recurrent state cannot be cut back to a position (rejected drafts could not be undone).
        self.recurrent = any(bool(getattr(llama_cpp, f, lambda _: False)(self.handle))
                             for f in ("llama_model_is_recurrent", "llama_model_is_hybrid"))
        self.size_bytes = llama_cpp.llama_model_size(self.handle)
        self.bos = llama_cpp.llama_vocab_bos(self.vocab)
        self.eos = llama_cpp.llama_vocab_eos(self.vocab)
        self.add_bos = bool(llama_cpp.llama_vocab_get_add_bos(self.vocab))
        # Fill-in-the-middle tokens the model was trained with (pre, suf, mid, rep, sep; -1: none).
        self.fim = {k: t for k in ("pre", "suf", "mid", "rep", "sep")
                    if (t := getattr(llama_cpp, f"llama_vocab_fim_{k}")(self.vocab)) >= 0}
        self._piece_buf = ctypes.create_string_buffer(256)

    def tokenize(self, text: str, add_special: bool, parse_special: bool = True) -> list[int]:
        data = text.encode("utf-8")
        cap = len(data) + 16
        buf = (llama_cpp.llama_token * cap)()
        n = llama_cpp.llama_tokenize(self.vocab, data, len(data), buf, cap, add_special, parse_special)
        if n < 0:  # buffer too small: n is minus the size needed
            cap = -n
            buf = (llama_cpp.llama_token * cap)()
            n = llama_cpp.llama_tokenize(self.vocab, data, len(data), buf, cap, add_special, parse_special)
            if n < 0:
                raise RuntimeError("tokenization failed")
        return list(buf[:n])

    def _piece_into(self, buf, token: int, special: bool) -> bytes:
        n = llama_cpp.llama_token_to_piece(self.vocab, token, buf, len(buf), 0, special)
        if n < 0:  # the piece is longer than buf: -n is the size it needs
            buf = ctypes.create_string_buffer(-n)
            n = llama_cpp.llama_token_to_piece(self.vocab, token, buf, -n, 0, special)
        return buf[:n]  # slicing the array copies n bytes, .raw would copy all 256

    def token_to_bytes(self, token: int, special: bool = False) -> bytes:
        # Not thread-safe (shared buffer): only the engine thread detokenizes.
        return self._piece_into(self._piece_buf, token, special)

    def piece(self, token: int, special: bool = False) -> bytes:
        """token_to_bytes with a buffer of its own: safe from any thread (server logprobs)."""
        return self._piece_into(ctypes.create_string_buffer(256), token, special)

    def detokenize(self, tokens: list[int], special: bool = False) -> str:
        buf = ctypes.create_string_buffer(256)
        return b"".join(self._piece_into(buf, t, special) for t in tokens).decode("utf-8", errors="replace")

    def is_eog(self, token: int) -> bool:
        return bool(llama_cpp.llama_vocab_is_eog(self.vocab, token))

    def meta(self, key: str) -> str | None:
        buf = ctypes.create_string_buffer(1 << 16)
        n = llama_cpp.llama_model_meta_val_str(self.handle, key.encode(), buf, len(buf))
        if n < 0:
            return None
        if n >= len(buf):
            buf = ctypes.create_string_buffer(n + 1)
            llama_cpp.llama_model_meta_val_str(self.handle, key.encode(), buf, len(buf))
        return buf.value.decode("utf-8", errors="replace")

    def close(self) -> None:
        if getattr(self, "handle", None):
            llama_cpp.llama_model_free(self.handle)
            self.handle = None

    __del__ = close


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
    poll: int = 50            # CPU threadpool polling; -1 = none attached (engine/threadpool.py)
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


class SamplerChain:
    """A llama_sampler chain; sample() also accepts the token (penalties see it)."""

    def __init__(self):
        params = llama_cpp.llama_sampler_chain_default_params()
        params.no_perf = True
        self.handle = llama_cpp.llama_sampler_chain_init(params)

    def add(self, sampler) -> "SamplerChain":
        # The chain takes ownership of the added sampler and frees it with itself.
        llama_cpp.llama_sampler_chain_add(self.handle, sampler)
        return self

    def sample(self, ctx: LlamaContext, idx: int) -> int:
        return llama_cpp.llama_sampler_sample(self.handle, ctx.handle, idx)

    def sample_checked(self, ctx: LlamaContext, idx: int, n_vocab: int) -> int | None:
        """llama_sampler_sample in three steps, so the choice is checked before it is accepted.

        A grammar marks refused tokens -inf; when it refuses every token the chain still picks
        one, and llama.cpp's grammar then aborts the process accepting it. Here that pick is
        seen (None is returned, nothing accepted) and only that request fails. Used for
        grammar-constrained sequences, whose grammar pass costs far more than this copy.
        """
        if getattr(self, "_cur", None) is None or len(self._cur) != n_vocab:
            self._cur = np.zeros(n_vocab, dtype=_TOKEN_DATA)
            self._ids = np.arange(n_vocab, dtype=np.int32)
        cur = self._cur
        cur["id"] = self._ids  # samplers sort the array in place: restore it each time
        cur["logit"] = np.ctypeslib.as_array(ctx.logits_ptr(idx), shape=(n_vocab,))
        cur["p"] = 0.0
        arr = llama_cpp.llama_token_data_array(
            data=cur.ctypes.data_as(llama_cpp.llama_token_data_p), size=n_vocab, selected=-1, sorted=False)
        llama_cpp.llama_sampler_apply(self.handle, ctypes.byref(arr))
        if not 0 <= arr.selected < arr.size:
            return None
        chosen = arr.data[arr.selected]  # `data` may now point into the sampler's own buffer
        if not (0 <= chosen.id < n_vocab and math.isfinite(chosen.logit)):
            return None
        llama_cpp.llama_sampler_accept(self.handle, chosen.id)
        return chosen.id

    def accept(self, token: int) -> None:
        llama_cpp.llama_sampler_accept(self.handle, token)

    def close(self) -> None:
        if getattr(self, "handle", None):
            llama_cpp.llama_sampler_free(self.handle)
            self.handle = None

    __del__ = close
