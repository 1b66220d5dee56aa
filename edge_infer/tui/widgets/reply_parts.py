"""An assistant reply's parts in the chat: a leading <think> block folded under
"Reasoning" above the answer, tool calls as cards below it, the rest as Markdown.

The conversation keeps the reply's raw text (history goes back to the model unchanged);
only the view splits it, reading it into reply events (chat.reply) in the family of the
model that wrote it.
"""

from __future__ import annotations

import json
import time

from rich.text import Text
from textual.widgets import Collapsible, Markdown, Static

from edge_infer.chat import families as tc
from edge_infer.chat.reply import Reply, ReplyEnd, ReplyReader, fold



# Redraw a streaming reply at most ~8 times a second: re-rendering Markdown on every token
# took half of the 2 cores from llama.cpp (60 vs 130 tok/s).
FLUSH_S = 0.12


def reply_stats_of(end: ReplyEnd, model: str, in_reasoning: bool) -> dict:
    """What a reply's footer shows and its conversation keeps."""
    st = end.stats
    return {"ttft_s": st.ttft_s, "decode_tok_s": st.decode_tok_s, "tokens": st.generated_tokens,
            "cached": st.cached_tokens, "finish": end.finish_reason, "model": model,
            **({"in_reasoning": True} if in_reasoning else {})}


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


def split_reply(text: str, family: tc.Family | None = None, starts_in_reasoning: bool = False) -> Reply | None:
    """A saved reply's parts, or None when it is plain text (shown as written).
    starts_in_reasoning: the model's template opened <think> in the prompt."""
    reader = ReplyReader(family or tc.family_named("hermes"), starts_in_reasoning=starts_in_reasoning)
    reply = fold(reader.token(text) + reader.end("stop"))
    return reply if reply.reasoning is not None or reply.tool_calls else None


class LiveReply:
    """A streaming reply's view: the engine's tokens in (feed, end), read into reply events
    (chat.reply), drawn on flush()."""

    def __init__(self, view, family: tc.Family | None = None, starts_in_reasoning: bool = False, scroll=None):
        self.view, self.scroll = view, scroll  # scroll: the container kept at its end while the reply grows
        self.last_flush = 0.0
        self.body = view.query_one(".body", Markdown)
        self.md = Markdown.get_stream(self.body)
        self.reader = ReplyReader(family or tc.family_named("hermes"), starts_in_reasoning=starts_in_reasoning)
        self.events: list = []
        self.tokens = 0  # token events fed
        self.reasoning: list[str] = []
        self.fold: Collapsible | None = None
        self.cards: dict[int, ToolCallCard] = {}

    def feed(self, text: str, call_began: bool = False) -> None:
        self.tokens += 1
        self.events += self.reader.token(text, call_began)

    @property
    def interrupted_before_first_token(self) -> bool:
        """Stopped, failed or cut off (the app closing) before the model wrote anything: a
        reply with nothing in it, which the conversation does not keep."""
        end = self.reader.ended
        return self.tokens == 0 and (end is None or end.finish_reason in ("cancelled", "error", "timeout", "unavailable"))

    def end(self, reason: str, text: str = "", stats=None, error: str | None = None) -> ReplyEnd:
        """The engine's finish: what was held back comes out; the reply's end, reason decided."""
        self.events += self.reader.end(reason, text, stats, error)
        return self.reader.ended

    async def flush(self, every: float = 0.0) -> bool:
        """Draws what arrived since the last flush, if `every` seconds have passed since; True
        when anything was drawn."""
        if time.monotonic() - self.last_flush < every:
            return False
        self.last_flush = time.monotonic()
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
        box = self.scroll
        if events and box is not None and box.max_scroll_y - box.scroll_y < 3:  # the reader follows the end
            box.scroll_end(animate=False)
        return bool(events)

    async def finish(self) -> None:
        """The view's last draw (a reply cut off without an end: what was held back, as is)."""
        if self.reader.ended is None:
            self.end("cancelled")
        if self.view.is_attached:  # not when the user left the conversation mid-reply
            await self.flush()
        await self.md.stop()
