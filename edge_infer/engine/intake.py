"""A request becomes a Sequence on the caller's thread: tokenized, checked against the
context, its sampler chain built (every number and grammar checked before llama.cpp sees
them), its drafter indexed. A request that cannot run fails here, before it is queued."""

from __future__ import annotations

from collections.abc import Callable

from edge_infer.config import EngineSettings
from edge_infer.engine.native.llama import LlamaModel
from edge_infer.engine.prompt import BadRequestError, Prompter
from edge_infer.engine.sampling import SamplingError, build_sampler
from edge_infer.engine.sequence import Request, Sequence
from edge_infer.engine.speculation import Speculation
from edge_infer.engine.stream import RequestStream
from edge_infer.errors import ContextOverflowError


class Intake:
    def __init__(self, model: LlamaModel, prompts: Prompter, speculation: Speculation,
                 settings: EngineSettings, n_ctx_seq: int):
        self.model, self.prompts, self.speculation = model, prompts, speculation
        self.settings, self.n_ctx_seq = settings, n_ctx_seq

    def sequence(self, request: Request, cancel: Callable[[], None]) -> Sequence:
        tokens = self.prompts.tokens_for(request)
        need = len(tokens) + len(request.forced_tokens or [])
        if len(tokens) >= self.n_ctx_seq or need > self.n_ctx_seq:
            raise ContextOverflowError(need if request.forced_tokens else len(tokens), self.n_ctx_seq,
                                       "raise --kv-budget" if self.n_ctx_seq < self.settings.ctx else "raise --ctx")
        try:
            sampler = None if request.forced_tokens is not None else build_sampler(self.model, request.sampling)
        except SamplingError as exc:
            raise BadRequestError(str(exc), about=exc.field) from exc
        stream = RequestStream(request.id, cancel=cancel, prompt_tokens=len(tokens),
                               starts_in_reasoning=self.prompts.opens_reasoning(request))
        seq = Sequence(request, tokens, stream, sampler, self.prompts.think_budget(request))
        # A long prompt is indexed for drafts here, not on the engine thread.
        seq.drafter = self.speculation.drafter_for(request, tokens)
        if self.settings.request_timeout > 0:
            seq.deadline = seq.stats.queued_at + self.settings.request_timeout
        return seq


def prime_penalties(seq: Sequence) -> None:
    """Penalties see the end of the prompt too, as llama.cpp's server does, so a reply does not
    parrot the question. (A grammar sampler must only see generated text.)"""
    p = seq.params
    if seq.sampler is not None and p.penalized and not p.grammar:
        for token in seq.prompt[-p.repeat_last_n:]:
            seq.sampler.accept(token)
