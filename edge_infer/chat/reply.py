"""A reply's tokens as typed reply events, for every face that shows a reply.

    reader = ReplyReader(family, reasoning="auto")
    reader.token(text, call_began) -> [events]   # each token's text as the engine streams it
    reader.end(reason, text, stats) -> [events]  # what was held back, calls done, ReplyEnd
    fold(events) -> Reply                        # the whole reply: the same events, folded

Events: ContentDelta, ReasoningDelta, ToolCallStart (index, id, name), ToolCallArgsDelta,
ToolCallDone (the whole call, once its arguments are complete), ReplyEnd (the finish reason,
decided here once: a reply that stopped after calling tools ends with "tool_calls").
A non-streamed reply is the fold of the events a stream would have sent.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Literal, Protocol, Union

from edge_infer.chat.events import (
    ContentDelta, IdFactory, ReasoningDelta, ToolCall, ToolCallArgsDelta, ToolCallStart, fold_events, new_call_id,
)
from edge_infer.chat.families.family import Family
from edge_infer.chat.reasoning import ReasoningSplitter

# Why a reply ended, one type for the engine and every face: the engine's reasons (stop, length,
# cancelled, error, timeout: the server's deadline), and "tool_calls" (a stop after calling tools).
FinishReason = Literal["stop", "length", "cancelled", "error", "timeout", "unavailable", "tool_calls"]
Reasoning = Literal["auto", "none", "drop"]


class TokenCounts(Protocol):
    """What a finished request counted (the engine's RequestStats)."""
    prompt_tokens: int
    generated_tokens: int
    cached_tokens: int


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0

    @classmethod
    def of(cls, stats: TokenCounts | None) -> "Usage | None":
        if stats is None:
            return None
        return cls(stats.prompt_tokens, stats.generated_tokens, stats.cached_tokens)


@dataclass(frozen=True)
class ToolCallDone:
    index: int
    call: ToolCall

    def arguments(self) -> dict:
        """The arguments as an object ({} when they are not one: a call cut short)."""
        try:
            args = json.loads(self.call.arguments_json) if self.call.arguments_json.strip() else {}
        except ValueError:
            return {}
        return args if isinstance(args, dict) else {}


@dataclass(frozen=True)
class ReplyEnd:
    finish_reason: FinishReason
    usage: Usage | None = None
    error: str | None = None
    stats: TokenCounts | None = None  # the engine's counters, for faces that show timings
    stop_sequence: str | None = None  # the stop string that ended it, if one did


ReplyEvent = Union[ContentDelta, ReasoningDelta, ToolCallStart, ToolCallArgsDelta, ToolCallDone, ReplyEnd]


@dataclass
class _OpenCall:
    id: str
    name: str
    arguments: list[str] = field(default_factory=list)
    held: list | None = None  # a later call's events, kept until it is known not to repeat one


class ReplyReader:
    """One per reply. family None: no tools to call (reasoning is still split off unless
    reasoning="none"); reasoning "drop" leaves reasoning out; starts_in_reasoning: the
    template opened a reasoning block in the prompt; constrained: the call grammar writes
    the whole reply (a forced call)."""

    def __init__(self, family: Family | None = None, *, reasoning: Reasoning = "auto",
                 starts_in_reasoning: bool = False, constrained: bool = False,
                 id_factory: IdFactory = new_call_id):
        self.family, self.reasoning = family, reasoning
        self.plain = family is None and reasoning == "none"  # text as it comes, no parsing
        if family is not None:
            self._parser = family.stream(id_factory, starts_in_reasoning=starts_in_reasoning,
                                         constrained=constrained)
        elif not self.plain:
            self._parser = ReasoningSplitter(starts_in_reasoning)
        self._splitter_only = family is None  # no calls to read: reasoning at most
        self._calls: dict[int, _OpenCall] = {}
        self._done: set[int] = set()
        self.calls_ended = False  # the model repeated a call it made: the reply's calls are over
        self.ended: ReplyEnd | None = None

    @property
    def called(self) -> bool:
        return bool(self._calls)

    def token(self, text: str, call_began: bool = False) -> list[ReplyEvent]:
        """A token's text (may be ""); call_began: that token began a grammar-written call."""
        if self.plain:
            return [ContentDelta(text)] if text else []
        splitter_only = self._splitter_only
        if splitter_only and self._parser.passthrough:  # most tokens of a plain chat: no parsing
            return [ContentDelta(text)] if text else []
        out = self._read(self._parser.feed(text)) if text else []
        if call_began and not splitter_only:
            out += self._read(self._parser.call_began())
        return out

    def end(self, reason: FinishReason, text: str = "", stats: TokenCounts | None = None,
            error: str | None = None, stop_sequence: str | None = None) -> list[ReplyEvent]:
        """The engine's finish: text it released at the end, then what the parser held back,
        every call not yet done, and ReplyEnd."""
        out = self.token(text) if text else []
        if not self.plain:
            out += self._read(self._parser.finish())
        out += self._complete(final=True)
        # A reply whose calls ended on a repeat is over, however the engine was stopped.
        finish: FinishReason = "tool_calls" if self.called and (reason == "stop" or self.calls_ended) else reason
        self.ended = ReplyEnd(finish, Usage.of(stats), error, stats, stop_sequence)
        return out + [self.ended]

    def _read(self, events) -> list[ReplyEvent]:
        """The parser's events, with the first call streamed as it comes and each later one
        held until whole: a call that repeats an earlier one (small models write the same
        call again until max_tokens) ends the reply's calls instead of being returned."""
        out: list[ReplyEvent] = []
        for ev in events:
            if isinstance(ev, ReasoningDelta) and self.reasoning == "drop":
                continue
            if self.calls_ended and not isinstance(ev, ReasoningDelta):
                continue  # what follows a repeated call is not the reply's
            call = None
            if isinstance(ev, ToolCallStart):
                call = self._calls[ev.index] = _OpenCall(ev.id, ev.name, held=[] if self._calls else None)
            elif isinstance(ev, ToolCallArgsDelta) and ev.index in self._calls:
                call = self._calls[ev.index]
                call.arguments.append(ev.fragment)
            if call is not None and call.held is not None:
                call.held.append(ev)
            else:
                out.append(ev)
            if isinstance(ev, ToolCallArgsDelta):
                out += self._complete(final=False)
        return out

    def _complete(self, final: bool) -> list[ReplyEvent]:
        """ToolCallDone for each call whose arguments are a whole JSON object now (at the
        end: every call), once each, in order; a repeat of an earlier call (or, cut by the
        end, the start of one) is dropped and ends the calls."""
        out: list[ReplyEvent] = []
        for i, call in sorted(self._calls.items()):
            if i in self._done:
                continue
            args = "".join(call.arguments)
            whole = _whole_object(args)
            if not final and not whole:
                break  # calls complete in order
            if self._repeats(call.name, args, whole):
                self.calls_ended = True
                for j in [j for j in self._calls if j >= i]:
                    del self._calls[j]
                break
            self._done.add(i)
            out += call.held or []
            call.held = None
            out.append(ToolCallDone(i, ToolCall(call.name, args, call.id)))
        return out

    def _repeats(self, name: str, args: str, whole: bool) -> bool:
        earlier = [c for j, c in self._calls.items() if j in self._done and c.name == name]
        if whole:
            return any(_same_json(args, "".join(c.arguments)) for c in earlier)
        cut = "".join(args.split())
        return bool(cut) and any("".join("".join(c.arguments).split()).startswith(cut) for c in earlier)


def _same_json(a: str, b: str) -> bool:
    try:
        return json.loads(a) == json.loads(b)
    except ValueError:
        return a == b


def _whole_object(text: str) -> bool:
    if not text.rstrip().endswith("}"):
        return False
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


@dataclass(frozen=True)
class Reply:
    """A whole reply: content is None when the reply only called tools (OpenAI's shape)."""
    content: str | None
    reasoning: str | None
    tool_calls: list[ToolCall]
    finish_reason: FinishReason | None
    usage: Usage | None = None


def fold(events) -> Reply:
    """The whole reply that a reader's events describe."""
    events = list(events)
    parsed = fold_events(events)  # content, reasoning, and calls from their start and arguments
    end = next((ev for ev in reversed(events) if isinstance(ev, ReplyEnd)), None)
    content = parsed.content if (parsed.content or not parsed.tool_calls) else None
    return Reply(content, parsed.reasoning, parsed.tool_calls, end.finish_reason if end else None,
                 end.usage if end else None)
