"""An assistant reply's parts in the chat: reasoning folded, tool calls as cards, the answer
as Markdown; streamed through the message view, and re-rendered from a saved message."""

import json

from textual.app import App, ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Collapsible, Markdown, Static

from edge_infer.chat import families as tc
from edge_infer.tui.conversations import Message
from edge_infer.tui.widgets.messages import MessageView
from edge_infer.engine import tool_family
from edge_infer.tui.widgets.reply_parts import LiveReply, ToolCallCard
from tests.doubles import EngineDouble

REPLY = ('<think>The user wants the weather.\nI should call the tool.</think>\n\n'
         'Let me check the weather in Paris.\n'
         '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n</tool_call>')


class Host(App):
    def __init__(self, *messages: Message):
        super().__init__()
        self.messages = messages

    def compose(self) -> ComposeResult:
        yield VerticalScroll(*(MessageView(m) for m in self.messages), id="messages")


def shown(widget) -> str:
    return str(widget.render())


async def stream_into(live: LiveReply, text: str, step: int) -> None:
    """A fake stream of small text deltas, drawn after each, then the end of the reply."""
    for i in range(0, len(text), step):
        live.feed(text[i:i + step])
        await live.flush()
    await live.finish()


def assert_parts(view: MessageView) -> None:
    fold = view.query_one(Collapsible)
    assert fold.title == "Reasoning" and fold.collapsed
    assert shown(fold.query_one(".reasoning-text", Static)) == "The user wants the weather.\nI should call the tool."
    card = view.query_one(ToolCallCard)
    text = shown(card)
    assert text.splitlines()[0] == "get_weather"
    assert json.loads(text.partition("\n")[2]) == {"city": "Paris", "unit": "celsius"}
    assert '"city": "Paris"' in text  # pretty-printed, one key a line
    answer = view.query_one(".body", Markdown)
    assert answer.source.strip() == "Let me check the weather in Paris."
    # Top to bottom: role, reasoning, answer, the call, the stats line.
    kinds = [type(w).__name__ for w in view.children]
    assert kinds == ["Label", "Collapsible", "Markdown", "ToolCallCard", "Static"]


async def test_a_streamed_reply_shows_reasoning_folded_and_tool_calls_as_cards():
    message = Message("assistant", "")
    app = Host(message)
    async with app.run_test(size=(100, 40)) as pilot:
        view = app.query_one(MessageView)
        live = LiveReply(view, tc.family_named("hermes"))
        for i in range(0, len(REPLY), 5):  # a fake stream of small text deltas
            live.feed(REPLY[i:i + 5])
            if i == 40:  # mid-thought: the fold is there and fills while the model thinks
                await live.flush()
                await pilot.pause()
                assert view.query_one(Collapsible).collapsed
                assert shown(view.query_one(".reasoning-text")).startswith("The user wants")
                assert not view.query(ToolCallCard)
            if i % 20 == 0:
                await live.flush()
        await live.finish()
        await pilot.pause()
        assert_parts(view)
        assert message.content == ""  # the view splits; the message (set by the chat) is untouched


async def test_a_saved_reply_renders_its_parts_and_keeps_its_raw_text():
    message = Message("assistant", REPLY)
    app = Host(Message("user", "Weather in Paris?"), message)
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.pause()
        user, reply = app.query(MessageView)
        assert not user.query(Collapsible) and not user.query(ToolCallCard)
        assert_parts(reply)
        assert message.content == REPLY  # history goes back to the model as written


async def test_a_plain_reply_renders_as_before():
    text = "**DNA** is the molecule that carries genetic instructions.\n\n- one\n- two\n"
    streamed = Message("assistant", "")
    app = Host(Message("assistant", text), streamed)
    async with app.run_test(size=(100, 40)) as pilot:
        saved, live_view = app.query(MessageView)
        await stream_into(LiveReply(live_view), text, 3)
        await pilot.pause()
        for view in (saved, live_view):
            assert [type(w).__name__ for w in view.children] == ["Label", "Markdown", "Static"]
            assert view.query_one(Markdown).source == text


def test_the_parser_follows_the_engines_template():
    class Template:
        supports_tools, source = False, "{{ messages }}"

    class Info:
        architecture = "qwen2"

    class Engine:
        template, info = Template(), Info()

    assert tool_family(None).name == "hermes"
    assert tool_family(Engine()).name == "hermes"  # no tool support: shown tools Hermes-style
    Template.supports_tools, Template.source = True, "<tool_call>{{ tools }}</tool_call>"
    assert tool_family(Engine()).name == "hermes"


class FakeStream:
    """An engine stream double: the reply as small text deltas, then the finish."""
    starts_in_reasoning = False

    def __init__(self, text: str):
        from edge_infer.engine import FinishEvent, RequestStats, TokenEvent

        self.events = [TokenEvent(i, text[i:i + 4]) for i in range(0, len(text), 4)]
        self.events.append(FinishEvent("stop", stats=RequestStats(generated_tokens=len(self.events))))

    def cancel(self):
        pass

    async def __aiter__(self):
        for ev in self.events:
            yield ev


class FakeEngine(EngineDouble):
    def submit(self, request):
        return FakeStream(REPLY)


class FakeLease:
    name, engine = "fake", FakeEngine()

    def release(self):
        pass


class FakeHost:
    current = None

    def find(self, model=None):
        return None


def chat_app(conversations) -> App:
    """An app holding only the chat pane, on a fake host, saving under `conversations`."""
    from edge_infer.tui.conversations import ConversationStore
    from edge_infer.tui.widgets.chat import ChatPane

    class ChatApp(App):
        def compose(self) -> ComposeResult:
            yield ChatPane(ConversationStore(conversations), FakeHost())

    return ChatApp()


async def test_the_chat_streams_a_reply_into_its_parts_and_stores_the_raw_text(tmp_path):
    from edge_infer.tui.widgets.chat import ChatPane

    from .conftest import wait_for

    app = chat_app(tmp_path / "conversations")
    async with app.run_test(size=(100, 40)) as pilot:
        chat = app.query_one(ChatPane)
        chat.add_message(Message("user", "Weather in Paris?"))
        chat._submit(chat.current, FakeLease())
        await wait_for(pilot, lambda: chat.stream is None, timeout=10)
        await pilot.pause()
        reply = app.query(MessageView).last()
        assert_parts(reply)
        assert reply.message.content == REPLY
        assert [m["content"] for m in chat.current.chat_messages()][-1] == REPLY  # sent back as written


async def test_a_reply_stopped_before_its_first_token_leaves_no_empty_answer(tmp_path):
    """An app killed before the first token finds the question saved, not an empty answer;
    a reply stopped before its first token is dropped, and its conversation saved without it."""
    import asyncio
    import json

    from edge_infer.engine import FinishEvent, RequestStats
    from edge_infer.tui.widgets.chat import ChatPane

    from .conftest import wait_for

    class HeldStream:
        released = asyncio.Event()
        starts_in_reasoning = False

        def cancel(self):
            self.released.set()

        async def __aiter__(self):
            await self.released.wait()  # nothing before the stop
            yield FinishEvent("cancelled", stats=RequestStats())

    class HeldEngine(FakeEngine):
        def submit(self, request):
            return HeldStream()

    class HeldLease(FakeLease):
        engine = HeldEngine()

    def saved_roles() -> list[str]:
        saved = json.loads((tmp_path / "conversations" / f"{chat.current.id}.json").read_text())
        return [m["role"] for m in saved["messages"]]

    app = chat_app(tmp_path / "conversations")
    async with app.run_test(size=(100, 40)) as pilot:
        chat = app.query_one(ChatPane)
        chat.add_message(Message("user", "Weather in Paris?"))
        chat._submit(chat.current, HeldLease())
        await pilot.pause()
        assert saved_roles() == ["user"]  # what a kill now leaves on disk
        chat.action_stop()
        await wait_for(pilot, lambda: chat.stream is None, timeout=10)
        await pilot.pause()
        assert [m.role for m in chat.current.messages] == ["user"] == saved_roles()
        assert [v.message.role for v in app.query(MessageView)] == ["user"]


async def test_a_reply_whose_template_opened_think_starts_in_its_reasoning():
    """DeepSeek-R1-style templates write <think> into the prompt: the reply holds only the
    closing tag. Streamed and saved (the chat records it in the reply's stats), the text
    before </think> folds into Reasoning."""
    text = "The user greets me.</think>Hello there!"
    saved = Message("assistant", text, {"ttft_s": 0.05, "decode_tok_s": 90.0, "tokens": 9, "cached": 0,
                                        "finish": "stop", "in_reasoning": True})
    streamed = Message("assistant", "")
    app = Host(saved, streamed)
    async with app.run_test(size=(100, 40)) as pilot:
        saved_view, live_view = app.query(MessageView)
        await stream_into(LiveReply(live_view, tc.family_named("hermes"), starts_in_reasoning=True), text, 4)
        await pilot.pause()
        for view in (saved_view, live_view):
            fold = view.query_one(Collapsible)
            assert shown(fold.query_one(".reasoning-text", Static)) == "The user greets me."
            assert view.query_one(".body", Markdown).source.strip() == "Hello there!"


async def test_ctrl_g_ends_the_replys_reasoning(tmp_path):
    """The key asks the engine to close the reply's <think> block (RequestStream.end_reasoning)."""
    import asyncio

    from edge_infer.engine import FinishEvent, RequestStats
    from edge_infer.tui.widgets.chat import ChatPane

    from .conftest import wait_for

    class ThinkingStream:
        ended = asyncio.Event()
        reasoning_cut = False
        starts_in_reasoning = True  # as a stream whose template opened <think>

        def cancel(self):
            self.ended.set()

        def end_reasoning(self):
            self.reasoning_cut = True
            self.ended.set()

        async def __aiter__(self):
            await self.ended.wait()
            yield FinishEvent("stop", stats=RequestStats())

    stream = ThinkingStream()

    class ThinkingEngine(FakeEngine):
        def submit(self, request):
            return stream

    class ThinkingLease(FakeLease):
        engine = ThinkingEngine()

    app = chat_app(tmp_path / "conversations")
    async with app.run_test(size=(100, 40)) as pilot:
        chat = app.query_one(ChatPane)
        chat.add_message(Message("user", "Think hard."))
        chat._submit(chat.current, ThinkingLease())
        await pilot.pause()
        await pilot.press("ctrl+g")
        await wait_for(pilot, lambda: chat.stream is None, timeout=10)
        assert stream.reasoning_cut
