"""Owner of a llama_sampler chain, and the chain a request's sampling settings make.

The numbers were checked before they get here (engine/sampling.py's check_params): llama.cpp's
samplers trust them."""

from __future__ import annotations

import ctypes
import math

import llama_cpp
import numpy as np

from edge_infer.engine.native.context import LlamaContext
from edge_infer.engine.native.llama import LlamaModel

# llama_token_data {llama_token id; float logit; float p;}, as a numpy record for bulk copies.
_TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])


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


def _logit_bias(pairs):
    """The C array for llama_sampler_init_logit_bias."""
    arr = (llama_cpp.llama_logit_bias * len(pairs))()
    for i, (token, bias) in enumerate(pairs):
        arr[i].token, arr[i].bias = token, bias
    return arr


def sampler_chain(model: LlamaModel, p, seed: int) -> SamplerChain:
    """The chain for SamplingParams `p` (checked already): logit bias, grammar, penalties,
    then greedy, or top-k / top-p / min-p / temperature / a seeded draw. ValueError when
    llama.cpp refuses the grammar."""
    chain = SamplerChain()
    if p.logit_bias:
        bias = _logit_bias(p.logit_bias)
        chain.add(llama_cpp.llama_sampler_init_logit_bias(model.n_vocab, len(bias), bias))
    if p.grammar:
        grammar = llama_cpp.llama_sampler_init_grammar(model.vocab, p.grammar.encode(), b"root")
        if not grammar:
            chain.close()
            raise ValueError("invalid grammar")
        chain.add(grammar)
    if p.penalized:
        # This llama.cpp build still takes n_vocab first (see its llama.h).
        chain.add(llama_cpp.llama_sampler_init_penalties(
            model.n_vocab, p.repeat_last_n, p.repeat_penalty, p.frequency_penalty, p.presence_penalty))
    if p.greedy:
        chain.add(llama_cpp.llama_sampler_init_greedy())
        return chain
    if p.top_k > 0:
        chain.add(llama_cpp.llama_sampler_init_top_k(p.top_k))
    if p.top_p < 1.0:
        chain.add(llama_cpp.llama_sampler_init_top_p(p.top_p, 1))
    if p.min_p > 0:
        chain.add(llama_cpp.llama_sampler_init_min_p(p.min_p, 1))
    chain.add(llama_cpp.llama_sampler_init_temp(p.temperature))
    chain.add(llama_cpp.llama_sampler_init_dist(seed))
    return chain
