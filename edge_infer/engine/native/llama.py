"""Owners of llama.cpp C handles: the model (its vocabulary and metadata); the backends' one-time
load and llama.cpp's log, which a load is read back from. The context and batch are in
context.py, the sampler chain in sampler.py.

Each class owns exactly one handle and frees it exactly once (close() or GC), in the
manner of llama-cpp-python's `_internals.py`. Nothing here knows about requests.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from pathlib import Path

import llama_cpp

log = logging.getLogger("edge_infer.llama")

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
    this CPU, see engine/native/cpu.py; with `gpus`, the GPU plug-ins this machine can use, once: a
    CPU-only caller passes False) and decide extra buffer types. Returns the BackendInfo.
    Raises EdgeInferError for a bad EDGE_INFER_CPU_VARIANT / EDGE_INFER_EXTRA_BUFTS."""
    global _backend_info
    with _backend_lock:
        from edge_infer.engine.native import backend, cpu

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

    def special_only_texts(self) -> list[str]:
        """The texts of the control and unknown tokens: the ones llama.cpp's tokenizer makes
        only when asked to parse special tokens (llama-vocab.cpp, tokenizer_st_partition)."""
        special_only = llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_UNKNOWN
        texts = []
        for token in range(self.n_vocab):
            if llama_cpp.llama_vocab_get_attr(self.vocab, token) & special_only:
                raw = llama_cpp.llama_vocab_get_text(self.vocab, token)
                if raw:
                    texts.append(raw.decode("utf-8", "replace"))
        return texts

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


def llama_cpp_version() -> str:
    """The bindings' version (a saved KV state is valid for this version only)."""
    return llama_cpp.__version__
