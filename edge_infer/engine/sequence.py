"""One request's state inside the engine: tokens, slot, status, sampler, text, timings."""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from enum import Enum

from edge_infer.engine.sampling import SamplingParams
from edge_infer.engine.stats import RequestStats
from edge_infer.engine.text import StopMatcher, Utf8Stream

_ids = itertools.count(1)


@dataclass
class Request:
    """What a caller submits. Give exactly one of prompt, messages or prompt_tokens."""
    prompt: str | None = None
    messages: list[dict] | None = None    # chat: role, content (+ tool_calls, tool_call_id)
    prompt_tokens: list[int] | None = None
    tools: list[dict] | None = None        # with messages: OpenAI tool dicts for the chat template
    template_vars: dict | None = None      # with messages: extra chat-template variables (enable_thinking)
    sampling: SamplingParams = field(default_factory=SamplingParams)
    source: str = "api"                    # who asked: cli, chat, api, bench (shown in stats)
    capture_logprobs: bool = False         # full log-softmax per generated position
    forced_tokens: list[int] | None = None  # evaluation: emit these instead of sampling
    draft_max: int | None = None           # n-gram speculation: tokens drafted per step (0 off, None: server's)
    reasoning_budget: int | None = None    # with messages: reasoning tokens before the engine closes the
                                           # <think> block (-1: no limit; None: the engine's --reasoning-budget)
    id: str = field(default_factory=lambda: f"req-{next(_ids)}")


class Status(Enum):
    WAITING = "queued"
    PREFILL = "prefill"
    DECODE = "decode"
    FINISHED = "finished"


class Sequence:
    def __init__(self, request: Request, prompt_tokens: list[int], stream, sampler=None, think=None):
        self.request = request
        self.id = request.id
        self.prompt = prompt_tokens
        self.params = request.sampling
        self.stream = stream
        self.sampler = sampler               # built by the engine thread on admission
        self.status = Status.WAITING
        self.slot = -1
        self.n_past = 0                      # tokens of this sequence already in the KV cache
        self.generated: list[int] = []
        self.next_token: int | None = None   # sampled, not yet fed back through the model
        self.cancelled = False               # set from any thread; the engine acts on it
        self.abandoned = False               # ended by the watchdog while the engine was stuck
        self.utf8 = Utf8Stream()
        self.stops = StopMatcher(self.params.stop)
        self.call_window = ""                # the text's tail, watched for params.call_trigger
        self.stats = RequestStats(prompt_tokens=len(prompt_tokens), queued_at=time.perf_counter())
        self.deadline = float("inf")          # perf_counter() time after which it is ended
        # Preempted when the KV pool ran out: it lost its cells and waits to be resumed. The
        # tokens to evaluate again are the prompt and what it generated, except next_token,
        # which is fed as before: nothing streamed is lost or repeated.
        self.resume_tokens: list[int] | None = None
        self.preemptions = 0
        self.drafter = None                  # NgramDrafter when speculation is on (engine/ngram.py)
        self.think = think                   # ThinkBudget of a chat reply (engine/think_budget.py)
        # Tokens the engine writes itself instead of sampling (a reasoning block's close marker).
        self.forced_next: list[int] = list(think.close_tokens) if think and think.closes_at_once() else []

    @property
    def resumed(self) -> bool:
        return self.resume_tokens is not None

    @property
    def prefill_tokens(self) -> list[int]:
        """What must be in the KV cache before it decodes (again)."""
        return self.prompt if self.resume_tokens is None else self.resume_tokens

    @property
    def prefill_left(self) -> int:
        return len(self.prefill_tokens) - self.n_past

    def preempted(self) -> None:
        """Its cells are gone: evaluate prompt + generated (but next_token) again on resume."""
        self.resume_tokens = self.prompt + self.generated[:-1] if self.generated else None
        self.preemptions += 1
        self.n_past = 0
        self.slot = -1
        self.status = Status.WAITING

    def dropped(self, now: float) -> bool:
        """Cancelled by its caller, ended by the watchdog, or past its deadline."""
        return self.cancelled or self.abandoned or now > self.deadline

    def end(self, flush: bool = True) -> str:
        """Stamp its end and free its sampler. Returns the text still held back (a split
        character, a partial stop string) when flushing, else ""."""
        self.stats.finished_at = time.perf_counter()
        self.stats.generated_tokens = len(self.generated)
        tail = ""
        if flush:
            tail, stopped = self.stops.feed(self.utf8.flush())
            if not stopped:
                tail += self.stops.flush()
        if self.sampler is not None:
            self.sampler.close()
            self.sampler = None
        return tail

    def __repr__(self) -> str:
        return f"<Sequence {self.id} {self.status.value} slot={self.slot} past={self.n_past}>"
