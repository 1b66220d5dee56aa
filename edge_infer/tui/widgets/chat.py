"""Chat: conversations at the side, streamed Markdown replies, a composer at the bottom.

Replies stream in an async worker that reads the engine's stream on the UI loop (the
engine thread wakes it), so keys keep working while the model generates.
"""

from __future__ import annotations

import time

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widget import Widget
from textual.widgets import Button, Input, Label, ListItem, ListView, Markdown, Static

from edge_infer.host import ModelHost
from edge_infer.tui.conversations import Conversation, ConversationStore, Message
from edge_infer.tui.screens.dialogs import ConfirmScreen, ConversationSettingsScreen, TextPromptScreen


FLUSH_S = 0.12  # seconds between redraws of a streaming reply


def reply_stats(stats: dict | None) -> str:
    if not stats:
        return ""
    parts = [f"TTFT {stats['ttft_s'] * 1000:.0f} ms", f"{stats['decode_tok_s']:.1f} tok/s",
             f"{stats['tokens']} tokens"]
    if stats.get("cached"):
        parts.append(f"{stats['cached']} prompt tokens reused")
    if stats.get("finish") not in (None, "stop"):
        parts.append(stats["finish"])
    return " · ".join(parts)


class MessageView(Vertical):
    def __init__(self, message: Message):
        super().__init__(classes=f"message {message.role}")
        self.message = message

    def compose(self) -> ComposeResult:
        yield Label("You" if self.message.role == "user" else "Assistant", classes="role")
        yield Markdown(self.message.content, classes="body")
        yield Static(reply_stats(self.message.stats), classes="reply-stats")

    def set_stats(self, stats: dict) -> None:
        self.message.stats = stats
        self.query_one(".reply-stats", Static).update(reply_stats(stats))


class ConversationItem(ListItem):
    def __init__(self, conv: Conversation):
        super().__init__(Label(conv.title))
        self.conv = conv


class ChatPane(Widget):
    BINDINGS = [
        Binding("escape", "stop", "Stop"),
        Binding("ctrl+n", "new_chat", "New chat"),
        Binding("ctrl+r", "regenerate", "Regenerate"),
        Binding("ctrl+t", "rename", "Rename"),
        Binding("ctrl+d", "delete_chat", "Delete"),
        Binding("ctrl+s", "settings", "Settings"),
    ]

    def __init__(self, store: ConversationStore, host: ModelHost, **kw):
        super().__init__(**kw)
        self.store = store
        self.host = host
        self.conversations: list[Conversation] = store.list() or [Conversation()]
        self.current = self.conversations[0]
        self.stream = None  # the engine stream of the reply being generated

    def compose(self) -> ComposeResult:
        with Horizontal():
            with Vertical(id="conv-sidebar"):
                yield Label("Conversations", classes="section")
                yield ListView(id="conv-list")
                yield Button("+ New chat", id="new-chat")
            with Vertical(id="chat-main"):
                yield Static(id="chat-title")
                yield VerticalScroll(id="messages")
                yield Input(placeholder="Message  (Enter sends · Esc stops · Ctrl+R regenerates)", id="prompt")

    def on_mount(self) -> None:
        self.refresh_list()
        self.show(self.current)
        self.query_one("#prompt", Input).focus()  # a new user can type right away

    # ---- conversation list ---------------------------------------------------------
    def refresh_list(self) -> None:
        lv = self.query_one("#conv-list", ListView)
        lv.clear()
        lv.extend(ConversationItem(conv) for conv in self.conversations)
        lv.index = self.conversations.index(self.current)

    @on(ListView.Selected, "#conv-list")
    def pick(self, event: ListView.Selected) -> None:
        conv = getattr(event.item, "conv", None)
        if conv is not None and conv is not self.current:
            self.abort_reply()
            self.current = conv
            self.show(conv)

    def show(self, conv: Conversation) -> None:
        box = self.query_one("#messages", VerticalScroll)
        box.remove_children()
        box.mount_all([MessageView(m) for m in conv.messages])
        box.scroll_end(animate=False)
        self.update_title()

    def update_title(self) -> None:
        host = self.host
        self.query_one("#chat-title", Static).update(f"[b]{self.current.title}[/b]  ·  {host.description}")

    # ---- sending and streaming ---------------------------------------------------------
    @on(Input.Submitted, "#prompt")
    def send(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if not text:
            return
        if self.stream is not None:
            self.notify("A reply is still streaming: Esc stops it.", severity="warning")
            return
        if not self.host.ready:
            self.notify("No model loaded yet: pick one on the Models tab.", severity="warning")
            return
        event.input.value = ""
        if not self.current.messages and self.current.title == "New chat":
            self.current.title = text[:40]
            self.refresh_list()
            self.update_title()
        self.add_message(Message("user", text))
        self.respond()

    def add_message(self, message: Message) -> MessageView:
        self.current.messages.append(message)
        view = MessageView(message)
        box = self.query_one("#messages", VerticalScroll)
        box.mount(view)
        box.scroll_end(animate=False)
        return view

    def respond(self) -> None:
        from edge_infer.engine import Request, SamplingParams
        from edge_infer.errors import EdgeInferError

        conv = self.current
        params = {k: v for k, v in conv.sampling.items() if v is not None}
        try:
            request = Request(messages=conv.chat_messages(), sampling=SamplingParams(**params), source="chat")
            self.stream = self.host.get().submit(request)
        except (EdgeInferError, ValueError, TypeError) as exc:
            # Nothing is lost: the message goes back into the composer.
            failed = self._drop_last()
            self.query_one("#prompt", Input).value = failed.content
            self.notify(str(exc), title="Cannot send", severity="error", timeout=8)
            return
        view = self.add_message(Message("assistant", ""))
        self.store.save(conv)
        self.stream_reply(conv, view, self.stream)

    @work(exclusive=True, group="reply")
    async def stream_reply(self, conv: Conversation, view: MessageView, stream) -> None:
        from edge_infer.engine import FinishEvent

        body = view.query_one(Markdown)
        md = Markdown.get_stream(body)
        box = self.query_one("#messages", VerticalScroll)
        parts: list[str] = []
        pending: list[str] = []
        last_flush = 0.0

        async def flush() -> None:
            nonlocal last_flush
            if pending:
                await md.write("".join(pending))
                pending.clear()
                if box.max_scroll_y - box.scroll_y < 3:
                    box.scroll_end(animate=False)
            last_flush = time.monotonic()

        try:
            async for event in stream:
                if event.text:
                    parts.append(event.text)
                    pending.append(event.text)
                # Redraw at most ~8 times a second: re-rendering Markdown on every token
                # took half of the 2 cores from llama.cpp (60 vs 130 tok/s).
                if time.monotonic() - last_flush > FLUSH_S or isinstance(event, FinishEvent):
                    await flush()
                if isinstance(event, FinishEvent):
                    st = event.stats
                    view.set_stats({"ttft_s": st.ttft_s, "decode_tok_s": st.decode_tok_s,
                                    "tokens": st.generated_tokens, "cached": st.cached_tokens,
                                    "finish": event.reason})
                    if event.error:
                        self.notify(event.error, title="Generation failed", severity="error")
        finally:
            await md.stop()
            view.message.content = "".join(parts)
            self.stream = None
            self.store.save(conv)

    # ---- actions -------------------------------------------------------------------
    def action_stop(self) -> None:
        if self.stream is not None:
            self.stream.cancel()

    def abort_reply(self) -> None:
        """Leaving a conversation: stop its reply and its worker before the view goes."""
        self.action_stop()
        self.workers.cancel_group(self, "reply")
        self.stream = None

    def action_new_chat(self) -> None:
        self.abort_reply()
        self.current = Conversation()
        self.conversations.insert(0, self.current)
        self.refresh_list()
        self.show(self.current)
        self.query_one("#prompt", Input).focus()

    @on(Button.Pressed, "#new-chat")
    def _new_button(self) -> None:
        self.action_new_chat()

    def _drop_last(self):
        """Take the conversation's last message back, and its view (the two stay in step)."""
        self.query(MessageView).last().remove()
        return self.current.messages.pop()

    def action_regenerate(self) -> None:
        msgs = self.current.messages
        if self.stream is not None or not msgs or not self.host.ready:
            return
        if msgs[-1].role == "assistant":
            self._drop_last()
        if msgs and msgs[-1].role == "user":
            self.respond()

    def action_rename(self) -> None:
        def done(title: str | None) -> None:
            if title:
                self.current.title = title
                self.store.save(self.current)
                self.refresh_list()
                self.update_title()
        self.app.push_screen(TextPromptScreen("Rename conversation", self.current.title), done)

    def action_delete_chat(self) -> None:
        def done(yes: bool) -> None:
            if not yes:
                return
            self.abort_reply()
            self.store.delete(self.current)
            self.conversations.remove(self.current)
            if not self.conversations:
                self.conversations.append(Conversation())
            self.current = self.conversations[0]
            self.refresh_list()
            self.show(self.current)
        self.app.push_screen(ConfirmScreen(f"Delete “{self.current.title}”?"), done)

    def action_settings(self) -> None:
        def done(result: dict | None) -> None:
            if result:
                self.current.system = result["system"]
                self.current.sampling.update(result["sampling"])
                self.store.save(self.current)
                self.notify("Conversation settings saved.")
        self.app.push_screen(ConversationSettingsScreen(self.current.system, self.current.sampling), done)
