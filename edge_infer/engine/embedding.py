"""Embeddings and reranking: a second llama.cpp context on the engine's loaded model.

Generation keeps its own context on the engine thread. This one has embeddings on and the
model's pooling, is created on the first call, and runs in the caller's thread, one call at
a time (a lock). Each llama_decode packs whole inputs as distinct sequences: llama.cpp pools
per ubatch, so an input must never span two ubatches (n_ubatch = n_batch = the most tokens
one input may have). Everything is checked here before llama.cpp sees it.
"""

from __future__ import annotations

import logging
import threading

import numpy as np

from edge_infer.engine.native.context import LlamaBatch
from edge_infer.engine.native.embedding_context import (CLS, LAST, MEAN, RANK, EmbeddingContext, embedding_width,
                                                       rerank_specials, trained_context)
from edge_infer.engine.native.llama import LlamaModel
from edge_infer.engine.prompt import BadRequestError
from edge_infer.errors import ContextOverflowError, EdgeInferError, EngineClosedError

log = logging.getLogger("edge_infer.engine")

POOLING_NAMES = {MEAN: "mean", CLS: "cls", LAST: "last", RANK: "rank"}
MAX_SEQS = 64  # inputs per llama_decode; llama.cpp allows up to LLAMA_MAX_SEQ (256)


class InputTooLongError(ContextOverflowError):
    """An input longer than the embedding context (a 400 context_length_exceeded, as a prompt)."""

    def __init__(self, where: str, n_tokens: int, limit: int, remedy: str):
        self.prompt_tokens, self.n_ctx = n_tokens, limit
        EdgeInferError.__init__(self, f"{where} is {n_tokens} tokens but an embedding input may hold "
                                      f"at most {limit}; shorten it or {remedy}")


class CannotRerankError(BadRequestError):
    """rerank() on a model without a ranking head (pooling type other than RANK)."""


def pooling_of(model: LlamaModel, architecture: str) -> int:
    """The GGUF's `{arch}.pooling_type`; MEAN when it has none (causal LMs) or says NONE,
    since every input must come back as one vector."""
    raw = model.meta(f"{architecture}.pooling_type")
    try:
        value = int(raw) if raw is not None else MEAN
    except ValueError:
        value = MEAN
    return value if value in POOLING_NAMES else MEAN


class Embedder:
    """Engine.embed / Engine.rerank: validation, packing, pooling output, normalization."""

    def __init__(self, model: LlamaModel, architecture: str, settings):
        self.model, self.settings = model, settings
        self.pooling = pooling_of(model, architecture)
        n_train = trained_context(model) or settings.n_batch
        # An input must fit one ubatch. n_batch, as generation uses: llama.cpp computes the
        # logits of every token here too, so the buffers hold n_batch x vocabulary floats.
        cap = min(settings.n_batch, settings.ctx, n_train)
        self.max_tokens = max(8, cap)
        self.max_seqs = min(MAX_SEQS, self.max_tokens)
        self._remedy = ("raise --n-batch" if cap == settings.n_batch else
                        "raise --ctx" if cap == settings.ctx else
                        f"use a model trained on longer inputs (this one: {n_train} tokens)")
        self.width = embedding_width(model, rank=self.pooling == RANK)
        self._lock = threading.Lock()
        self._ctx: EmbeddingContext | None = None
        self._batch: LlamaBatch | None = None
        self._closed = False

    def reserve_bytes(self, kv_bytes_per_token: int) -> int:
        """RAM the embedding context holds once created (0 before): llama.cpp computes every
        token's logits there, n_batch x vocabulary floats in the output and compute buffers
        (measured: +190 MiB SmolLM2, +1 GiB Gemma 3), plus its KV cells."""
        if self._ctx is None:
            return 0
        return 2 * self.max_tokens * self.model.n_vocab * 4 + self.max_tokens * kv_bytes_per_token

    @property
    def can_rerank(self) -> bool:
        return self.pooling == RANK

    def embed(self, inputs: list, normalize: bool = True,
              dimensions: int | None = None) -> tuple[list[list[float]], int]:
        if self.can_rerank:
            raise BadRequestError("this model is a reranker (rank pooling): it scores query-document "
                                  "pairs, use rerank")
        seqs = self._tokens_of(inputs)
        vectors = self._run(seqs)
        if dimensions is not None:  # OpenAI's shortened vectors: cut, then (normalized) unit length again
            vectors = vectors[:, :dimensions]
        if normalize:
            vectors = l2_normalize(vectors)
        return vectors.tolist(), sum(map(len, seqs))

    def rerank(self, query: str, documents: list[str]) -> tuple[list[float], int]:
        if not self.can_rerank:
            raise CannotRerankError(f"this model has {POOLING_NAMES[self.pooling]} pooling, not a ranking "
                                    "head: load a reranker model (a GGUF with pooling type rank)")
        if not documents:
            raise BadRequestError("documents must not be empty")
        q = self._text_tokens(query, "query", special=False)
        seqs = [self._pair(q, self._text_tokens(d, f"documents[{i}]", special=False))
                for i, d in enumerate(documents)]
        self._check(seqs, "documents")
        return self._run(seqs)[:, 0].tolist(), sum(map(len, seqs))

    def close(self) -> None:
        """Free the context once no call is running (waits for one that is)."""
        self._closed = True
        if not self._lock.acquire(timeout=60):
            log.warning("an embedding call is still running; its context is left to the process exit")
            return
        try:
            if self._ctx is not None:
                self._ctx.close()
                self._batch.close()
                self._ctx = self._batch = None
        finally:
            self._lock.release()

    # ---- validation ------------------------------------------------------------------
    def _tokens_of(self, inputs: list) -> list[list[int]]:
        if not isinstance(inputs, list) or not inputs:
            raise BadRequestError("input must not be empty")
        seqs = []
        for i, item in enumerate(inputs):
            if isinstance(item, str):
                seqs.append(self._text_tokens(item, f"input[{i}]", special=True))
            else:
                tokens = list(item)
                if not tokens:
                    raise BadRequestError(f"input[{i}] is empty")
                bad = next((t for t in tokens if not (isinstance(t, int) and 0 <= t < self.model.n_vocab)), None)
                if bad is not None:
                    raise BadRequestError(f"input[{i}]: token id {bad} is outside the vocabulary "
                                          f"(0..{self.model.n_vocab - 1})")
                seqs.append(tokens)
        self._check(seqs, "input")
        return seqs

    def _text_tokens(self, text: str, where: str, special: bool) -> list[int]:
        if not text:
            raise BadRequestError(f"{where} is empty")
        try:
            tokens = self.model.tokenize(text, add_special=special)
        except UnicodeEncodeError:  # JSON's "\ud800" decodes to a lone surrogate: not UTF-8
            raise BadRequestError(f"{where} is not valid Unicode (it has a lone surrogate code point)") from None
        if not tokens:
            raise BadRequestError(f"{where} has no tokens")
        return tokens

    def _check(self, seqs: list[list[int]], name: str) -> None:
        for i, tokens in enumerate(seqs):
            if len(tokens) > self.max_tokens:
                raise InputTooLongError(f"{name}[{i}]", len(tokens), self.max_tokens, self._remedy)

    def _pair(self, query: list[int], doc: list[int]) -> list[int]:
        """[BOS] query [EOS] [SEP] doc [EOS], as llama-server's format_rerank (each token only
        where the vocabulary asks for it; EOS falls back to SEP)."""
        bos, eos, sep, add_bos, add_eos, add_sep = rerank_specials(self.model)
        eos = sep if eos < 0 else eos
        out = ([bos] if add_bos else []) + query
        out += ([eos] if add_eos else []) + ([sep] if add_sep else []) + doc + ([eos] if add_eos else [])
        return [t for t in out if 0 <= t < self.model.n_vocab]

    # ---- llama.cpp -------------------------------------------------------------------
    def _run(self, seqs: list[list[int]]) -> np.ndarray:
        with self._lock:
            if self._closed:
                raise EngineClosedError("the engine is shut down")
            ctx = self._context()
            rows = []
            for group in pack(seqs, self.max_tokens, self.max_seqs):
                self._batch.clear()
                for s, tokens in enumerate(group):
                    for pos, token in enumerate(tokens):
                        self._batch.add(token, pos, s, True)  # embeddings need every token out
                rows.append(ctx.run(self._batch, len(group), self.width))
        return np.concatenate(rows)

    def _context(self) -> EmbeddingContext:
        if self._ctx is None:
            self._ctx = EmbeddingContext(self.model, self.max_tokens, self.max_seqs, self.settings.n_threads,
                                         self.pooling)
            self._batch = LlamaBatch(self.max_tokens)
            log.info("embedding context: %d tokens per input, %s pooling", self.max_tokens,
                     POOLING_NAMES.get(self._ctx.pooling, self._ctx.pooling))
        return self._ctx


def pack(seqs: list[list[int]], max_tokens: int, max_seqs: int):
    """Consecutive groups of whole sequences with at most max_tokens tokens and max_seqs each."""
    group, n = [], 0
    for tokens in seqs:
        if group and (n + len(tokens) > max_tokens or len(group) == max_seqs):
            yield group
            group, n = [], 0
        group.append(tokens)
        n += len(tokens)
    if group:
        yield group


def l2_normalize(rows: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.where(norms > 0, norms, 1.0)
