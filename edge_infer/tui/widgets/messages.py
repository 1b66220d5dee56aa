"""The chat's pieces: one message (Markdown, with its reply's stats line) and one
conversation in the side list."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Label, ListItem, Markdown, Static

from edge_infer.chat.families import Family
from edge_infer.tui.conversations import Conversation, Message
from edge_infer.tui.widgets.reply_parts import ToolCallCard, reasoning_fold, split_reply


def reply_stats(stats: dict | None) -> str:
    if not stats:
        return ""
    parts = [stats["model"]] if stats.get("model") else []
    parts += [f"TTFT {stats['ttft_s'] * 1000:.0f} ms", f"{stats['decode_tok_s']:.1f} tok/s",
              f"{stats['tokens']} tokens"]
    if stats.get("cached"):
        parts.append(f"{stats['cached']} prompt tokens reused")
    if stats.get("finish") not in (None, "stop"):
        parts.append(stats["finish"])
    return " · ".join(parts)


class MessageView(Vertical):
    """One message; an assistant reply's reasoning and tool calls apart from its answer."""

    def __init__(self, message: Message, family: Family | None = None):
        super().__init__(classes=f"message {message.role}")
        self.message = message
        self.family = family  # the tool-call family of the model that wrote it (None: Hermes)

    def compose(self) -> ComposeResult:
        yield Label("You" if self.message.role == "user" else "Assistant", classes="role")
        in_reasoning = bool((self.message.stats or {}).get("in_reasoning"))  # its template opened <think>
        parts = split_reply(self.message.content, self.family, in_reasoning) \
            if self.message.role == "assistant" else None
        if parts is None:  # plain text: shown as written
            yield Markdown(self.message.content, classes="body")
        else:
            if parts.reasoning is not None:
                yield reasoning_fold(parts.reasoning)
            yield Markdown(parts.content, classes="body")
            yield from (ToolCallCard(call.name, call.arguments_json) for call in parts.tool_calls)
        yield Static(reply_stats(self.message.stats), classes="reply-stats", markup=False)

    def set_stats(self, stats: dict) -> None:
        self.message.stats = stats
        self.query_one(".reply-stats", Static).update(reply_stats(stats))


class ConversationItem(ListItem):
    def __init__(self, conv: Conversation):
        super().__init__(Label(conv.title))
        self.conv = conv
