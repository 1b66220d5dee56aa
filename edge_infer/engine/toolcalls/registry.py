"""Which tool-call syntax a model speaks, from its chat template (and architecture).

A family is one small module that calls register(); parser_for() tries families in
priority order and falls back to the generic JSON parser.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Callable

from edge_infer.engine.toolcalls.events import (
    ContentDelta, IdFactory, ParsedReply, fold_events, new_call_id,
)
from edge_infer.engine.toolcalls.constrained import ConstrainedCalls
from edge_infer.engine.toolcalls.matchers import Matcher
from edge_infer.engine.toolcalls.reasoning import ReasoningSplitter
from edge_infer.engine.toolcalls.stream import ToolCallStream
from edge_infer.engine.toolcalls.wrappers import WRAPPERS, CallWrapper

Detect = Callable[[str, str], bool]   # (chat_template, architecture) -> speaks this family


@dataclass
class ToolCallParser:
    """One family's syntax: matchers for its call regions, and the trigger strings."""

    family: str
    make_matchers: Callable[[], list[Matcher]]
    triggers: tuple[str, ...] = ()
    think: bool = True        # split <think> blocks off first

    @property
    def wrapper(self) -> CallWrapper | None:
        """The syntax the engine's call grammar writes for this family (None: no grammar)."""
        return WRAPPERS.get(self.family)

    def stream(self, id_factory: IdFactory = new_call_id, *, starts_in_reasoning: bool = False,
               constrained: bool = False) -> "StreamParser":
        return StreamParser(self, id_factory, starts_in_reasoning=starts_in_reasoning,
                            constrained=constrained)

    def parse(self, text: str | list[str], id_factory: IdFactory = new_call_id, *,
              starts_in_reasoning: bool = False, constrained: bool = False,
              call_began_at: int | None = None) -> ParsedReply:
        """The whole reply. Given as the pieces it was streamed in and the index of the piece
        whose token began a grammar-written call (call_began_at), it is read exactly as
        the stream read it (which feeds that piece, then calls call_began())."""
        pieces = [text] if isinstance(text, str) else text
        sp = self.stream(id_factory, starts_in_reasoning=starts_in_reasoning, constrained=constrained)
        cut = len(pieces) if call_began_at is None else call_began_at + 1
        events = sp.feed("".join(pieces[:cut]))
        if call_began_at is not None:
            sp.call_began()
        return fold_events(events + sp.feed("".join(pieces[cut:])) + sp.finish())


class StreamParser:
    """Text deltas in; ContentDelta / ReasoningDelta / ToolCallStart / ToolCallArgsDelta out."""

    def __init__(self, parser: ToolCallParser, id_factory: IdFactory = new_call_id, *,
                 starts_in_reasoning: bool = False, constrained: bool = False):
        self.parser = parser
        self._think = ReasoningSplitter(starts_in_reasoning) if parser.think else None
        self._tools = ToolCallStream(parser.make_matchers(), id_factory)
        if constrained:  # a forced reply: the call grammar writes it from its first token
            self.call_began()

    def call_began(self) -> None:
        """The engine switched this reply to the call grammar (TokenEvent.call_began; call it
        after feeding that token's text): from the call that token opened on, calls stream
        their name and arguments as they come."""
        wrapper = self.parser.wrapper
        if wrapper is not None and wrapper.syntax == "json":  # others are read whole, as before
            self._tools.constrain(ConstrainedCalls(wrapper))

    def feed(self, text: str) -> list:
        if self._think is None:
            return self._tools.feed(text)
        return self._route(self._think.feed(text))

    def finish(self) -> list:
        out = self._route(self._think.finish()) if self._think is not None else []
        return out + self._tools.finish()

    def _route(self, events) -> list:
        out = []
        for ev in events:
            out += self._tools.feed(ev.text) if isinstance(ev, ContentDelta) else [ev]
        return out


@dataclass(order=True)
class _Entry:
    priority: int
    family: str = field(compare=False)
    detect: Detect = field(compare=False)
    factory: Callable[[], ToolCallParser] = field(compare=False)


_FAMILIES: list[_Entry] = []
_FALLBACK: dict[str, Callable[[], ToolCallParser]] = {}
_FAMILY_MODULES = ("hermes", "llama3", "mistral", "gemma", "generic")


def register(family: str, detect: Detect | None, priority: int = 50):
    """Decorator for a zero-argument factory of a family's ToolCallParser.
    detect=None registers the fallback."""
    def deco(factory):
        if detect is None:
            _FALLBACK["generic"] = factory
        else:
            _FAMILIES[:] = sorted([e for e in _FAMILIES if e.family != family]
                                  + [_Entry(priority, family, detect, factory)])
        return factory
    return deco


def _load_families() -> None:
    for mod in _FAMILY_MODULES:
        importlib.import_module(f"edge_infer.engine.toolcalls.{mod}")


def families() -> list[str]:
    _load_families()
    return [e.family for e in _FAMILIES] + list(_FALLBACK)


def parser_for(chat_template: str | None, architecture: str | None = None) -> ToolCallParser:
    """The parser for a model, chosen from markers in its chat template."""
    _load_families()
    tmpl, arch = chat_template or "", (architecture or "").lower()
    for entry in _FAMILIES:
        if entry.detect(tmpl, arch):
            return entry.factory()
    return _FALLBACK["generic"]()


def parser_for_engine(engine, forced: bool = False) -> ToolCallParser:
    """The syntax a loaded model writes its calls in: its template's family, or Hermes where
    its template has no tool support (the tools were shown to it Hermes-style, see
    engine/tool_prompt.py), where there is no engine (a saved conversation's model), or
    where a call is forced and the family has no grammar wrapper to write it in. Server
    and TUI agree."""
    template = getattr(engine, "template", None)
    if template is None or not getattr(template, "supports_tools", False):
        return parser_named("hermes")
    parser = parser_for(template.source, getattr(getattr(engine, "info", None), "architecture", None))
    return parser_named("hermes") if forced and parser.wrapper is None else parser


def parser_named(family: str) -> ToolCallParser:
    _load_families()
    for entry in _FAMILIES:
        if entry.family == family:
            return entry.factory()
    if family in _FALLBACK:
        return _FALLBACK[family]()
    raise KeyError(family)


def family_markers(parser: ToolCallParser) -> tuple[str, ...]:
    """Trigger strings that open a call in this family (for lazy grammars)."""
    return parser.triggers
