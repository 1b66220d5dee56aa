"""Owner of the embedding llama_context (embeddings on, the model's pooling), and the model's
numbers embeddings and reranking need. engine/embedding.py validates and packs the inputs."""

from __future__ import annotations

import logging

import llama_cpp
import numpy as np

from edge_infer.engine.native.context import LlamaBatch
from edge_infer.engine.native.llama import LlamaModel, capture_log
from edge_infer.errors import EdgeInferError

log = logging.getLogger("edge_infer.engine")

MEAN, CLS, LAST, RANK = (llama_cpp.LLAMA_POOLING_TYPE_MEAN, llama_cpp.LLAMA_POOLING_TYPE_CLS,
                         llama_cpp.LLAMA_POOLING_TYPE_LAST, llama_cpp.LLAMA_POOLING_TYPE_RANK)


def trained_context(model: LlamaModel) -> int:
    """The context length the model was trained on (0: the file does not say)."""
    return llama_cpp.llama_model_n_ctx_train(model.handle)


def embedding_width(model: LlamaModel, rank: bool) -> int:
    """Floats per output: the ranking head's classes, or the embedding's width."""
    if rank:
        return llama_cpp.llama_model_n_cls_out(model.handle)
    embd_out = getattr(llama_cpp, "llama_model_n_embd_out", llama_cpp.llama_model_n_embd)
    return embd_out(model.handle)


def rerank_specials(model: LlamaModel) -> tuple[int, int, int, bool, bool, bool]:
    """(BOS, EOS, SEP, add BOS, add EOS, add SEP) of the vocabulary, for query/document pairs."""
    v = model.vocab
    return (llama_cpp.llama_vocab_bos(v), llama_cpp.llama_vocab_eos(v), llama_cpp.llama_vocab_sep(v),
            bool(llama_cpp.llama_vocab_get_add_bos(v)), bool(llama_cpp.llama_vocab_get_add_eos(v)),
            bool(llama_cpp.llama_vocab_get_add_sep(v)))


class EmbeddingContext:
    """One llama_context with embeddings on, freed once. Used under Embedder's lock only."""

    def __init__(self, model: LlamaModel, n_tokens: int, n_seq_max: int, n_threads: int, pooling: int):
        params = llama_cpp.llama_context_default_params()
        # One decode = one ubatch, whose size a multiple of n_seq_max: llama.cpp aborts in a
        # mat-mul (GGML_ASSERT ggml_can_mul_mat) on some other sizes (--n-batch 300, 64
        # sequences), measured; the inputs still hold at most `n_tokens`.
        size = -(-n_tokens // n_seq_max) * n_seq_max
        params.n_ctx = params.n_batch = params.n_ubatch = size
        params.n_seq_max = n_seq_max
        params.n_threads = params.n_threads_batch = n_threads
        params.kv_unified = True  # one stream: any input may use any cell, never split by sequence
        params.embeddings = True
        params.pooling_type = pooling
        # Flash attention off, whatever --flash-attn says: on the CPU its kernel for many query
        # rows changed a vector by up to 2e-3 depending on which other inputs shared the decode
        # (measured on SmolLM2); without it a batch gives each input's vector as alone.
        params.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
        params.no_perf = True
        # No persistent CpuThreadpools: a ggml pool computes one graph at a time and the
        # engine's is busy generating; ggml makes a pool per graph, which also spins nothing
        # between the (rare) embedding calls.
        self.model = model  # keep the model alive as long as the context
        with capture_log() as lines:
            self.handle = llama_cpp.llama_init_from_model(model.handle, params)
        if not self.handle:
            raise EdgeInferError("llama.cpp could not create the embedding context (out of memory?)")
        for line in lines:
            if "buffer size" in line:
                log.info("embedding context: %s", line.strip())
        self.memory = llama_cpp.llama_get_memory(self.handle)  # None for encoder-only models
        self.pooling = llama_cpp.llama_pooling_type(self.handle)

    def run(self, batch: LlamaBatch, n_seqs: int, width: int) -> np.ndarray:
        """Decode one packed batch (sequences 0..n_seqs-1, each from position 0) -> pooled rows."""
        if self.memory:
            llama_cpp.llama_memory_clear(self.memory, True)  # positions restart at 0 every call
        batch.handle.n_tokens = batch.n
        rc = llama_cpp.llama_decode(self.handle, batch.handle)
        if rc != 0:
            raise EdgeInferError(f"llama.cpp could not compute the embeddings (llama_decode returned {rc})")
        out = np.empty((n_seqs, width), dtype=np.float32)
        for s in range(n_seqs):
            ptr = llama_cpp.llama_get_embeddings_seq(self.handle, s)
            if not ptr:
                raise EdgeInferError(f"llama.cpp returned no pooled output for sequence {s}")
            out[s] = np.ctypeslib.as_array(ptr, shape=(width,))
        return out

    def close(self) -> None:
        if getattr(self, "handle", None):
            llama_cpp.llama_free(self.handle)
            self.handle = None

    __del__ = close
