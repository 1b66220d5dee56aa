"""Chat: conversations at the side, streamed Markdown replies, a composer at the bottom.

Each conversation chats with its own model (the default one until its first reply; Ctrl+O
picks another). A reply holds a lease on that model from submit to the stream's end, so
the host never unloads it mid-reply; a model not loaded yet loads in a thread worker
first. Replies stream in an async worker that reads the engine's stream on the UI loop
(the engine thread wakes it), so keys keep working while the model generates.
"""

from __future__ import annotations

from rich.markup import escape
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widget import Widget
from textual.widgets import Button, Input, Label, ListView, Static

from edge_infer.engine import FinishEvent, tool_family
from edge_infer.host import ModelHost
from edge_infer.tui.conversations import Conversation, ConversationStore, Message
from edge_infer.tui.screens.dialogs import ConfirmScreen, ConversationSettingsScreen, TextPromptScreen
from edge_infer.tui.screens.pick_model import ModelPickerScreen
from edge_infer.tui.widgets.messages import ConversationItem, MessageView
from edge_infer.tui.widgets.reply_parts import FLUSH_S, LiveReply, reply_stats_of




class ChatPane(Widget):
    BINDINGS = [
        Binding("escape", "stop", "Stop"),
        Binding("ctrl+g", "end_thinking", "Answer now", show=False),  # ctrl+e is the input's end of line
        Binding("ctrl+n", "new_chat", "New chat"),
        Binding("ctrl+r", "regenerate", "Regenerate"),
        Binding("ctrl+t", "rename", "Rename"),
        Binding("ctrl+d", "delete_chat", "Delete"),
        Binding("ctrl+s", "settings", "Settings"),
        Binding("ctrl+o", "pick_model", "Model"),
    ]

    def __init__(self, store: ConversationStore, host: ModelHost, **kw):
        super().__init__(**kw)
        self.store = store
        self.host = host
        self.conversations: list[Conversation] = store.list() or [Conversation()]
        self.current = self.conversations[0]
        self.stream = None  # the engine stream of the reply being generated
        self.lease = None   # the reply's hold on its model (released when the stream ends)
        self.loading: str | None = None  # the model a sent message waits for
        self._pending = None  # token of the send that waits for its model (None: none, or stopped)

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
        loaded = self.host.find(self.model_of(conv))  # None: its model is not loaded (Hermes)
        family = tool_family(loaded.engine if loaded is not None else None)
        box.mount_all([MessageView(m, family) for m in conv.messages])
        box.scroll_end(animate=False)
        self.update_title()

    def model_of(self, conv: Conversation) -> str | None:
        """The model `conv` chats with: its own, else the host's default (None: none loaded)."""
        if conv.model:
            return conv.model
        current = self.host.current
        return current.name if current else None

    def update_title(self) -> None:
        model = self.model_of(self.current)
        found = self.host.find(model) if model else None
        if self.loading:
            text = f"loading {self.loading}…"
        elif found is not None:
            s = found.settings
            text = f"{found.name} · ctx {s.ctx} · {s.parallel} slots · {s.n_threads} threads"
        elif model:
            text = f"{model} (loads when you send)"
        else:
            text = "no model loaded"
        self.query_one("#chat-title", Static).update(f"[b]{escape(self.current.title)}[/b]  ·  {escape(text)}")

    # ---- sending and streaming ---------------------------------------------------------
    @on(Input.Submitted, "#prompt")
    def send(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if not text:
            return
        if self.stream is not None or self.loading:
            self.notify("A reply is still streaming: Esc stops it." if self.stream is not None
                        else f"Still loading {self.loading}: Esc stops waiting.", severity="warning")
            return
        if self.model_of(self.current) is None:
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
        """Answer the conversation's last message with its model: at once when the model is
        loaded, else after a worker thread loads it."""
        conv = self.current
        model = self.model_of(conv)
        conv.model = model  # the conversation remembers the model it started with
        lease = self.host.try_acquire(model)
        if lease is not None:
            self._submit(conv, lease)
            return
        token = object()  # this send's: a stop or a new send makes it stale
        self.loading, self._pending = model, token
        self.update_title()
        self.acquire(conv, model, token)

    @work(thread=True, exclusive=True, group="acquire")
    def acquire(self, conv: Conversation, model: str, token) -> None:
        try:
            lease = self.host.acquire(model)  # loads it (seconds): never on the UI loop
        except Exception as exc:  # unknown, does not fit, busy, load failed: the app goes on
            self.app.call_from_thread(self._acquire_failed, conv, model, token, exc)
            return
        self.app.call_from_thread(self._acquired, conv, lease, token)

    def _acquired(self, conv: Conversation, lease, token) -> None:
        if token is not self._pending or conv is not self.current:
            lease.release()  # stopped, or the user left this conversation while it loaded
            return
        self.loading = self._pending = None
        self._submit(conv, lease)

    def _acquire_failed(self, conv: Conversation, model: str, token, exc: BaseException) -> None:
        if token is not self._pending:
            return
        self.loading = self._pending = None
        if conv is self.current:
            self._take_back()
        self.update_title()
        self.notify(str(exc) or type(exc).__name__, title=f"Cannot load {model}", severity="error", timeout=10)

    def _take_back(self) -> None:
        """Nothing is lost: the unanswered message goes back into the composer."""
        if self.current.messages and self.current.messages[-1].role == "user":
            self.query_one("#prompt", Input).value = self._drop_last().content

    def _submit(self, conv: Conversation, lease) -> None:
        from edge_infer.engine import Request, SamplingParams
        from edge_infer.errors import EdgeInferError

        params = {k: v for k, v in conv.sampling.items() if v is not None}
        try:
            request = Request(messages=conv.chat_messages(), sampling=SamplingParams(**params), source="chat")
            self.stream = lease.engine.submit(request)
        except (EdgeInferError, ValueError, TypeError) as exc:
            lease.release()
            self._take_back()
            self.update_title()
            self.notify(str(exc), title="Cannot send", severity="error", timeout=8)
            return
        self.lease = lease
        self.update_title()
        self.store.save(conv)  # the question, not yet a reply: an app killed now keeps no empty answer
        view = self.add_message(Message("assistant", ""))
        self.stream_reply(conv, view, self.stream, lease)

    @work(exclusive=True, group="reply")
    async def stream_reply(self, conv: Conversation, view: MessageView, stream, lease) -> None:
        # An R1-style template opens <think> in the prompt: the reply starts in its reasoning
        # (the engine's decision, carried on the stream).
        in_reasoning = stream.starts_in_reasoning
        live = LiveReply(view, tool_family(lease.engine), in_reasoning,  # reasoning, tool-call cards, answer
                         scroll=self.query_one("#messages", VerticalScroll))
        parts: list[str] = []
        try:
            async for event in stream:
                parts.append(event.text)
                if not isinstance(event, FinishEvent):
                    live.feed(event.text, event.call_began)
                    await live.flush(every=FLUSH_S)
                    continue
                end = live.end(event.reason, event.text, event.stats, event.error)
                await live.flush()
                view.set_stats(reply_stats_of(end, lease.name, in_reasoning))
                if event.error:
                    self.notify(event.error, title="Generation failed", severity="error")
        finally:
            view.message.content = "".join(parts)  # before `stream` clears: a done reply holds its text
            if live.interrupted_before_first_token:  # keep no empty answer
                conv.forget(view.message)
                view.remove()
            lease.release()  # also on cancel and errors: the model may go idle (keep-alive, eviction)
            if self.lease is lease:
                self.lease = None
            await live.finish()  # a cancelled worker stops here: abort_reply cleared `stream` itself
            if self.stream is stream:
                self.stream = None
            self.store.save(conv)

    # ---- actions -------------------------------------------------------------------
    def action_end_thinking(self) -> None:
        """The reply's reasoning ends now: the engine closes its <think> block, the answer follows."""
        if self.stream is not None:
            self.stream.end_reasoning()

    def action_stop(self) -> None:
        if self.stream is not None:
            self.stream.cancel()
        elif self.loading:
            # The load goes on in its thread (llama.cpp cannot be interrupted); the reply won't.
            self.notify(f"Stopped waiting: {self.loading} goes on loading.")
            self.loading = self._pending = None
            self._take_back()
            self.update_title()

    def abort_reply(self) -> None:
        """Leaving a conversation: stop its reply and its worker before the view goes."""
        if self.stream is not None:
            self.stream.cancel()
        self.loading = self._pending = None
        self.workers.cancel_group(self, "reply")
        self.stream = None
        if self.lease is not None:  # the cancelled worker releases it too: only the first counts
            self.lease.release()
            self.lease = None

    def action_pick_model(self) -> None:
        entries = self.host.listing()
        if not entries:
            self.notify("No models installed or loaded: get one on the Models tab.", severity="warning")
            return
        conv = self.current

        def done(name: str | None) -> None:
            if not name or conv is not self.current:
                return
            conv.model = name
            if conv.messages:
                self.store.save(conv)
            self.update_title()
            loaded = self.host.find(name) is not None
            self.notify(f"This conversation uses {name}" + ("." if loaded else " (it loads when you send)."))

        self.app.push_screen(ModelPickerScreen(entries, self.model_of(conv)), done)

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
        if self.stream is not None or self.loading or not msgs or self.model_of(self.current) is None:
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
