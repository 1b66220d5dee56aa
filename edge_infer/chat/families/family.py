"""A tool-call family: one dialect's syntax, everything about it in one object.

    family = family_for(chat_template, architecture)   # registry.py
    reply = family.parse(text)                          # ParsedReply
    parser = family.stream(); parser.feed(delta) -> events; parser.finish() -> events
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from edge_infer.chat.events import ContentDelta, IdFactory, ParsedReply, fold_events, new_call_id
from edge_infer.chat.families.calls import ToolCallStream
from edge_infer.chat.families.constrained import ConstrainedCalls
from edge_infer.chat.families.matchers import Matcher
from edge_infer.chat.families.syntax import CallWrapper
from edge_infer.chat.reasoning import THINK_CLOSE, THINK_OPEN, ReasoningSplitter

Detect = Callable[[str, str], bool]   # (chat_template, architecture) -> speaks this family


@dataclass(frozen=True)
class Family:
    """name; detect: how it is recognised from a chat template (None: the fallback);
    matchers: its parser, fresh per reply; triggers: text that opens a call in it; wrapper:
    the call syntax its grammars write, with the arguments' syntax in wrapper.syntax (None:
    no grammar); reasoning: the markers of its reasoning block (None: not split off);
    priority: lower is tried first when detecting."""

    name: str
    detect: Detect | None
    matchers: Callable[[], list[Matcher]]
    triggers: tuple[str, ...] = ()
    wrapper: CallWrapper | None = None
    reasoning: tuple[str, str] | None = (THINK_OPEN, THINK_CLOSE)
    priority: int = 50

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
            events += sp.call_began()
        return fold_events(events + sp.feed("".join(pieces[cut:])) + sp.finish())


class StreamParser:
    """Text deltas in; ContentDelta / ReasoningDelta / ToolCallStart / ToolCallArgsDelta out."""

    def __init__(self, family: Family, id_factory: IdFactory = new_call_id, *,
                 starts_in_reasoning: bool = False, constrained: bool = False):
        self.family = family
        self._think = ReasoningSplitter(starts_in_reasoning, *family.reasoning) if family.reasoning else None
        self._tools = ToolCallStream(family.matchers(), id_factory)
        if constrained:  # a forced reply: the call grammar writes it from its first token
            self.call_began()

    def call_began(self) -> list:
        """The engine switched this reply to the call grammar (TokenEvent.call_began; call it
        after feeding that token's text): from the call that token opened on, calls stream
        their name and arguments as they come. Returns the events of text decided by it."""
        wrapper = self.family.wrapper
        if wrapper is not None and wrapper.syntax == "json":  # others are read whole, as before
            return self._tools.constrain(ConstrainedCalls(wrapper))
        return []

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
