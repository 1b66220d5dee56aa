"""An assistant reply's parts in the chat: a leading <think> block folded under
"Reasoning" above the answer, tool calls as cards below it, the rest as Markdown.

The conversation keeps the reply's raw text (history goes back to the model unchanged);
only the view splits it, with the engine's tool-call parsers (chat.families).
"""

from __future__ import annotations

import json

from rich.text import Text
from textual.widgets import Collapsible, Markdown, Static

from edge_infer.chat import families as tc



def pretty_arguments(arguments_json: str) -> str:
    """Indented JSON when the arguments parse (so far), else the text as written."""
    try:
        return json.dumps(json.loads(arguments_json), indent=2, ensure_ascii=False)
    except ValueError:
        return arguments_json


class ToolCallCard(Static):
    """One call the model wrote: the function's name and its arguments."""

    DEFAULT_CSS = """
    ToolCallCard { border: round $accent; padding: 0 1; height: auto; margin: 0 0 1 0; }
    """

    def __init__(self, name: str, arguments_json: str = ""):
        super().__init__(classes="tool-call", markup=False)
        self.function, self.arguments_json = name, arguments_json
        self.border_title = "tool call"
        self._show()

    def add_arguments(self, fragment: str) -> None:
        self.arguments_json += fragment
        self._show()

    def _show(self) -> None:
        args = pretty_arguments(self.arguments_json)
        self.update(Text.assemble((self.function, "bold"), *(("\n", args) if args else ())))


def reasoning_fold(text: str = "") -> Collapsible:
    """The folded "Reasoning" block (collapsed: a click or Enter opens it)."""
    return Collapsible(Static(text, classes="reasoning-text", markup=False),
                       title="Reasoning", collapsed=True, classes="reasoning")


def split_reply(text: str, parser: tc.Family | None = None,
                starts_in_reasoning: bool = False) -> tc.ParsedReply | None:
    """A saved reply's parts, or None when it is plain text (shown as written).
    starts_in_reasoning: the model's template opened <think> in the prompt."""
    reply = (parser or tc.family_named("hermes")).parse(text, starts_in_reasoning=starts_in_reasoning)
    return reply if reply.reasoning is not None or reply.tool_calls else None


class LiveReply:
    """A streaming reply's view: text deltas in, parts drawn on flush()."""

    def __init__(self, view, parser: tc.Family | None = None, starts_in_reasoning: bool = False):
        self.view = view
        self.body = view.query_one(".body", Markdown)
        self.md = Markdown.get_stream(self.body)
        self.parser = (parser or tc.family_named("hermes")).stream(starts_in_reasoning=starts_in_reasoning)
        self.events: list = []
        self.reasoning: list[str] = []
        self.fold: Collapsible | None = None
        self.cards: dict[int, ToolCallCard] = {}

    def feed(self, text: str) -> None:
        self.events += self.parser.feed(text)

    async def flush(self) -> bool:
        """Draws what arrived since the last flush; True when anything did."""
        events, self.events = self.events, []
        content, thought = [], False
        for ev in events:
            if isinstance(ev, tc.ContentDelta):
                content.append(ev.text)
            elif isinstance(ev, tc.ReasoningDelta):
                self.reasoning.append(ev.text)
                thought = True
            elif isinstance(ev, tc.ToolCallStart):
                anchor = list(self.cards.values())[-1] if self.cards else self.body
                self.cards[ev.index] = card = ToolCallCard(ev.name)
                await self.view.mount(card, after=anchor)
            elif isinstance(ev, tc.ToolCallArgsDelta) and ev.index in self.cards:
                self.cards[ev.index].add_arguments(ev.fragment)
        if thought:
            if self.fold is None:
                self.fold = reasoning_fold()
                await self.view.mount(self.fold, before=self.body)
            self.fold.query_one(".reasoning-text", Static).update("".join(self.reasoning))
        if content:
            await self.md.write("".join(content))
        return bool(events)

    async def finish(self) -> None:
        self.events += self.parser.finish()
        if self.view.is_attached:  # not when the user left the conversation mid-reply
            await self.flush()
        await self.md.stop()
