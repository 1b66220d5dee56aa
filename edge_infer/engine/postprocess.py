"""After each decode: give every sampled token to its sequence and decide which sequences end.

Pure Python: the vocabulary (end-of-generation tokens, token bytes) is passed in, so the
finish rules are unit-tested with fake sequences and no model. The engine applies the
outcomes: it streams the events and finishes the sequences.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from edge_infer.chat.reply import FinishReason
from edge_infer.engine.sequence import Sequence
from edge_infer.engine.stream import TokenEvent

NO_ALLOWED_TOKEN = "the grammar allows no token this model can produce at this point"


class Vocab(Protocol):
    def is_eog(self, token: int) -> bool: ...

    def token_to_bytes(self, token: int) -> bytes: ...


@dataclass
class Sampled:
    seq: Sequence
    token: int | None                 # None: the grammar allowed nothing, the sequence cannot go on
    logprobs: np.ndarray | None = None  # when the request asked for them


@dataclass(frozen=True)
class Outcome:
    seq: Sequence
    event: TokenEvent | None = None  # the token and its text, to stream (None: not emitted)
    finish: FinishReason | None = None        # stop | length | error: end the sequence so
    error: str | None = None
    flush: bool = True               # release the text held back (not after a stop string)
    constrain: bool = False          # a tool call began: switch to params.call_grammar now


def postprocess_token(sampled: Sampled, vocab: Vocab, n_ctx_seq: int | None = None) -> Outcome:
    """Append the token (or not) and apply the finish rules, in the order they win."""
    seq, token = sampled.seq, sampled.token
    if token is None:
        return Outcome(seq, finish="error", error=NO_ALLOWED_TOKEN)
    forced, p = seq.request.forced_tokens, seq.params
    # A grammar offers end-of-generation only once it is complete: nothing can follow,
    # so ignore_eos does not apply to it. Forced tokens are emitted whatever they are.
    if forced is None and (p.grammar or not p.ignore_eos) and vocab.is_eog(token):
        return Outcome(seq, finish="stop")
    seq.generated.append(token)
    piece = vocab.token_to_bytes(token)
    text, stopped = seq.stops.feed(seq.utf8.feed(piece))
    think = seq.think
    # (most replies never open a block: once decided, no decode per token)
    if think is not None and not think.done and think.after(piece.decode("utf-8", "replace"),
                                                            cut=seq.stream.reasoning_cut):
        seq.forced_next = list(think.close_tokens)  # its reasoning is over: the answer comes next
    event = TokenEvent(token, text, sampled.logprobs)
    n = len(seq.generated)
    if stopped:
        return Outcome(seq, event, "stop", flush=False)
    if (forced is not None and n >= len(forced)) or (p.max_tokens and n >= p.max_tokens):
        return Outcome(seq, event, "length")
    if n_ctx_seq is not None and seq.n_past >= n_ctx_seq:  # no room left to feed this token back
        return Outcome(seq, event, "length")
    seq.next_token = token
    if p.call_trigger and call_began(seq, vocab.token_to_bytes(token)):
        event.call_began = True  # readers of the stream may trust the call's syntax from here
        return Outcome(seq, event, constrain=True)
    return Outcome(seq, event)


def call_began(seq: Sequence, piece: bytes) -> bool:
    """True once, when the reply's text ends with params.call_trigger plus only whitespace."""
    trigger = seq.params.call_trigger
    if not trigger or seq.params.grammar:
        return False
    seq.call_window = (seq.call_window + piece.decode("utf-8", "replace"))[-(len(trigger) + 16):]
    _, found, rest = seq.call_window.rpartition(trigger)
    return bool(found) and not rest.strip()
