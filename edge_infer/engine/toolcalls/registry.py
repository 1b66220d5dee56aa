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
from edge_infer.engine.toolcalls.matchers import Matcher
from edge_infer.engine.toolcalls.reasoning import ReasoningSplitter
from edge_infer.engine.toolcalls.stream import ToolCallStream

Detect = Callable[[str, str], bool]   # (chat_template, architecture) -> speaks this family


@dataclass
class ToolCallParser:
    """One family's syntax: matchers for its call regions, and the trigger strings."""

    family: str
    make_matchers: Callable[[], list[Matcher]]
    triggers: tuple[str, ...] = ()
    think: bool = True        # split <think> blocks off first

    def stream(self, id_factory: IdFactory = new_call_id, *,
               starts_in_reasoning: bool = False) -> "StreamParser":
        return StreamParser(self, id_factory, starts_in_reasoning=starts_in_reasoning)

    def parse(self, text: str, id_factory: IdFactory = new_call_id, *,
              starts_in_reasoning: bool = False) -> ParsedReply:
        sp = self.stream(id_factory, starts_in_reasoning=starts_in_reasoning)
        return fold_events(sp.feed(text) + sp.finish())


class StreamParser:
    """Text deltas in; ContentDelta / ReasoningDelta / ToolCallStart / ToolCallArgsDelta out."""

    def __init__(self, parser: ToolCallParser, id_factory: IdFactory = new_call_id, *,
                 starts_in_reasoning: bool = False):
        self.parser = parser
        self._think = ReasoningSplitter(starts_in_reasoning) if parser.think else None
        self._tools = ToolCallStream(parser.make_matchers(), id_factory)

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
    engine/tool_prompt.py), where a call is forced (the grammar writes the Hermes wrapper),
    or where there is no engine (a saved conversation's model). Server and TUI agree."""
    template = getattr(engine, "template", None)
    if forced or template is None or not getattr(template, "supports_tools", False):
        return parser_named("hermes")
    return parser_for(template.source, getattr(getattr(engine, "info", None), "architecture", None))


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
