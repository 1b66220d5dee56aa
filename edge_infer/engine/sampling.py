"""Sampling parameters, their checks, and the sampler chain built from them (native/sampler.py).

Sampling stays inside llama.cpp's sampler chain (no logits copied into Python), which
keeps the per-token hot path in C. Each sequence gets its own chain, so its random
stream and penalties never depend on what else shares the batch.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, replace
from functools import lru_cache

from edge_infer.chat.gbnf.check import CheckedGrammar, GrammarError, TokenRef, validate_gbnf
from edge_infer.engine.native.llama import LlamaModel
from edge_infer.engine.native.sampler import SamplerChain, sampler_chain


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 0.8      # <= 0 means greedy
    top_k: int = 40               # <= 0 disables
    top_p: float = 0.95           # >= 1 disables
    min_p: float = 0.05           # <= 0 disables
    repeat_penalty: float = 1.0   # 1.0 disables
    repeat_last_n: int = 64
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    seed: int | None = None       # None: a fresh random seed per request
    max_tokens: int | None = 256  # None: until the context is full
    stop: tuple[str, ...] = field(default_factory=tuple)
    ignore_eos: bool = False      # benchmarks: always generate max_tokens
    grammar: str | None = None    # GBNF; constrains output (JSON mode)
    # Tool calls under tool_choice "auto": once the reply writes call_trigger (then nothing but
    # whitespace), the rest of it is constrained by call_grammar (chat/gbnf/tools.py).
    call_trigger: str | None = None
    call_grammar: str | None = None
    logit_bias: tuple[tuple[int, float], ...] = ()  # (token id, added to its logit)

    def __post_init__(self):
        if isinstance(self.stop, str):
            object.__setattr__(self, "stop", (self.stop,))
        elif not isinstance(self.stop, tuple):
            object.__setattr__(self, "stop", tuple(self.stop))
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError("max_tokens must be at least 1")
        if self.top_p <= 0:
            raise ValueError("top_p must be greater than 0")
        if isinstance(self.logit_bias, dict):
            object.__setattr__(self, "logit_bias", tuple(self.logit_bias.items()))

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0

    @property
    def penalized(self) -> bool:
        return self.repeat_penalty != 1.0 or bool(self.presence_penalty) or bool(self.frequency_penalty)



def _check_grammar(text: str) -> tuple[TokenRef, ...]:
    """The grammar's token references; validated here unless it was where it was made (the
    server checks what a request sends, our converters what they write)."""
    if isinstance(text, CheckedGrammar):
        return text.refs
    return _validate(str(text))


@lru_cache(maxsize=32)
def _validate(text: str) -> tuple[TokenRef, ...]:
    # Every sequence builds its own sampler, often from the same grammar (n choices). Unused
    # rules are allowed here: the server refuses them in user grammars itself.
    return validate_gbnf(text, allow_unused=True)


def _check_tokens(model: LlamaModel, refs: tuple[TokenRef, ...]) -> None:
    """A grammar that requires a token the model cannot sample leaves no token allowed, and
    llama.cpp aborts the process when sampling gets there: an id past the vocabulary, a text
    that is not exactly one token, an end-of-generation token (allowed only where the grammar
    ends, so requiring one is never satisfiable)."""
    for ref in refs:
        shown = f"<[{ref.token_id}]>" if ref.token_id is not None else ref.text
        if ref.token_id is not None:
            token = ref.token_id
            if token >= model.n_vocab:
                if ref.negated:  # "any token but one that does not exist": harmless
                    continue
                raise GrammarError(f"token {shown} at {ref.where} is outside the vocabulary "
                                   f"(0..{model.n_vocab - 1})")
        else:
            ids = model.tokenize(ref.text, add_special=False, parse_special=True)
            if len(ids) != 1:
                raise GrammarError(f"{shown} at {ref.where} is not a single token of this model "
                                   f"({len(ids)} tokens)")
            token = ids[0]
        if not ref.negated and model.is_eog(token):
            raise GrammarError(f"token {shown} at {ref.where} ends generation; a grammar cannot "
                               "require it (generation ends where the grammar does)")


# ---- numbers before C: every value of SamplingParams that reaches a llama.cpp call ---------
FLOAT32_MAX = 3.4028234663852886e38
INT32_MAX = 2**31 - 1
# Logits are multiplied or divided by repeat_penalty: inside this range they stay finite
# (a logit of 0 times an infinite penalty is NaN; one divided by 1e-40 is infinite).
REPEAT_PENALTY_RANGE = (1e-6, 1e6)
MAX_REPEAT_LAST_N = 1 << 20   # llama.cpp keeps a ring buffer of this many tokens per sequence
MAX_LOGIT_BIAS = 1e6          # added to float32 logits: beyond it they are no longer comparable
RANDOM_SEED = 0xFFFFFFFF      # LLAMA_DEFAULT_SEED: llama_sampler_init_dist draws a random seed for it
_FLOATS = ("temperature", "top_p", "min_p", "repeat_penalty", "presence_penalty", "frequency_penalty")


class SamplingError(ValueError):
    """A sampling setting that must not reach llama.cpp; `field` names it (a SamplingParams
    field, or "grammar"), so a server can say which of its request's fields it was."""

    def __init__(self, message: str, field: str):
        super().__init__(message)
        self.field = field


def check_params(model: LlamaModel, p: SamplingParams) -> None:
    """Refuse (ValueError starting with the field's name; the server answers 400) any number
    that would reach llama.cpp's samplers unfit: NaN or infinite floats or ones beyond float32,
    an int past int32, a penalty that makes logits NaN, a token id outside the vocabulary.
    Called by build_sampler, so every face (OpenAI, Anthropic, Responses, Ollama, infill, the
    app, the CLI) gets the same checks whatever its own schema let through."""
    for name in _FLOATS:
        v = getattr(p, name)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or abs(v) > FLOAT32_MAX:
            raise SamplingError(f"{name}: {v!r} is not a finite number (llama.cpp takes a 32-bit float)", name)
    lo, hi = REPEAT_PENALTY_RANGE
    if not lo <= p.repeat_penalty <= hi:
        raise SamplingError(f"repeat_penalty: {p.repeat_penalty} is outside {lo:g}..{hi:g} (1 = off)", "repeat_penalty")
    for name, low, high in (("top_k", -INT32_MAX - 1, INT32_MAX), ("repeat_last_n", 0, MAX_REPEAT_LAST_N)):
        v = getattr(p, name)
        if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= high:
            raise SamplingError(f"{name}: {v!r} is outside {low}..{high}", name)
    if p.seed is not None and (isinstance(p.seed, bool) or not isinstance(p.seed, int)):
        raise SamplingError(f"seed: {p.seed!r} is not an integer", "seed")
    for token, bias in p.logit_bias:
        if isinstance(token, bool) or not isinstance(token, int) or not 0 <= token < model.n_vocab:
            raise SamplingError(f"logit_bias: token id {token} is outside the vocabulary (0..{model.n_vocab - 1})",
                                "logit_bias")
        if isinstance(bias, bool) or not isinstance(bias, (int, float)) or not math.isfinite(bias) \
                or abs(bias) > MAX_LOGIT_BIAS:
            raise SamplingError(f"logit_bias: the bias for token {token} is not a finite number "
                                f"within ±{MAX_LOGIT_BIAS:g}", "logit_bias")


def dist_seed(seed: int | None) -> int:
    """The uint32 llama_sampler_init_dist takes. None or -1: a fresh random seed (-1 means that
    in llama-server and Ollama). Any other integer is reduced modulo 2**32 (what the OpenAI
    API's int64 seed becomes in llama.cpp's uint32), and 2**32-1, which llama.cpp reads as
    "draw a random seed", is taken as 2**32-2: a seeded request always repeats."""
    if seed is None or seed == -1:
        return int.from_bytes(os.urandom(4), "little") % RANDOM_SEED  # never the sentinel itself
    reduced = seed % 2**32
    return reduced - 1 if reduced == RANDOM_SEED else reduced


def build_sampler(model: LlamaModel, p: SamplingParams) -> SamplerChain:
    check_params(model, p)
    for g in (p.grammar, p.call_grammar):  # the call grammar too: it is switched to mid-reply
        if g:
            try:  # llama.cpp hangs or aborts on some grammars instead of refusing them
                _check_tokens(model, _check_grammar(g))
            except GrammarError as exc:
                raise SamplingError(f"invalid grammar: {exc}", "grammar") from None
    try:
        return sampler_chain(model, p, dist_seed(p.seed))
    except ValueError as exc:  # llama.cpp refused the grammar
        raise SamplingError(str(exc), "grammar") from None


def constrain_to_call(model: LlamaModel, seq) -> bool:
    """A tool call began (params.call_trigger): from the next token on, the sequence samples
    under params.call_grammar, so the call's arguments parse and follow their schema."""
    params = replace(seq.params, grammar=seq.params.call_grammar, call_trigger=None)
    try:
        sampler = build_sampler(model, params)
    except ValueError:
        return False
    seq.sampler.close()
    seq.sampler, seq.params = sampler, params
    return True
