"""What the tool-call parsers produce: whole replies and the events of a streamed one."""

from __future__ import annotations

import secrets
import string
from dataclasses import dataclass, field
from typing import Callable, Union

_ALNUM = string.ascii_letters + string.digits

IdFactory = Callable[[], str]


def new_call_id() -> str:
    """An OpenAI-style tool call id: "call_" + 24 random alphanumerics."""
    return "call_" + "".join(secrets.choice(_ALNUM) for _ in range(24))


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments_json: str
    id: str = ""


@dataclass(frozen=True)
class ParsedReply:
    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    reasoning: str | None = None


@dataclass(frozen=True)
class ContentDelta:
    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    text: str


@dataclass(frozen=True)
class ToolCallStart:
    index: int
    id: str
    name: str


@dataclass(frozen=True)
class ToolCallArgsDelta:
    index: int
    fragment: str


Event = Union[ContentDelta, ReasoningDelta, ToolCallStart, ToolCallArgsDelta]


def fold_events(events) -> ParsedReply:
    """The whole reply that a sequence of stream events describes."""
    content, reasoning, saw_reasoning = [], [], False
    names: dict[int, tuple[str, str]] = {}
    args: dict[int, list[str]] = {}
    for ev in events:
        if isinstance(ev, ContentDelta):
            content.append(ev.text)
        elif isinstance(ev, ReasoningDelta):
            saw_reasoning = True
            reasoning.append(ev.text)
        elif isinstance(ev, ToolCallStart):
            names[ev.index] = (ev.id, ev.name)
            args.setdefault(ev.index, [])
        elif isinstance(ev, ToolCallArgsDelta):
            args.setdefault(ev.index, []).append(ev.fragment)
    calls = [ToolCall(names[i][1], "".join(args[i]), names[i][0]) for i in sorted(names)]
    return ParsedReply("".join(content), calls, "".join(reasoning) if saw_reasoning else None)
