"""The Chat tab in a real (headless) terminal with the real SmolLM2."""

from textual.widgets import Input, Label, ListView, Markdown, Static, TabbedContent

from edge_infer.tui.conversations import ConversationStore
from edge_infer.tui.widgets.chat import ChatPane, MessageView

from .conftest import toasts, wait_for


async def send(pilot, text):
    app = pilot.app
    prompt = app.query_one("#prompt", Input)
    prompt.focus()
    prompt.value = text
    await pilot.press("enter")


async def test_chat_streams_a_reply_with_its_stats(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.host.ready)
        chat = app.query_one(ChatPane)
        await send(pilot, "What is the capital of France?")
        await wait_for(pilot, lambda: len(app.query(MessageView)) == 2)
        await wait_for(pilot, lambda: chat.stream is None and app.query(MessageView).last().message.stats)
        reply = app.query(MessageView).last()
        assert reply.message.role == "assistant" and reply.message.content.strip()
        stats_line = str(reply.query_one(".reply-stats").render())
        assert "TTFT" in stats_line and "tok/s" in stats_line
        assert chat.current.title.startswith("What is the capital")


async def test_keys_work_while_a_reply_streams_and_esc_stops_it(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.host.ready)
        chat = app.query_one(ChatPane)
        # ignore_eos: the story must still be streaming when Esc arrives (a short one made this flaky)
        chat.current.sampling.update(max_tokens=2000, temperature=0.8, ignore_eos=True)
        await send(pilot, "Write a very long story about the sea.")
        await wait_for(pilot, lambda: chat.stream is not None and
                       app.host.get().snapshot().generated_tokens_total > 5)
        # The UI still answers: switch tabs and back while tokens arrive.
        await pilot.press("f4")
        await pilot.pause()
        assert app.query_one(TabbedContent).active == "stats"
        await pilot.press("f1")
        await pilot.pause()
        assert app.query_one(TabbedContent).active == "chat"
        app.query_one("#prompt", Input).focus()
        await pilot.press("escape")
        await wait_for(pilot, lambda: chat.stream is None)
        reply = app.query(MessageView).last().message
        assert reply.stats["finish"] == "cancelled"
        assert reply.stats["tokens"] < 2000
        assert app.host.get().snapshot().running == 0


async def test_conversations_persist_and_restore(make_app, tmp_path):
    store = ConversationStore(tmp_path / "conversations")
    app = make_app(store=store)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.host.ready)
        chat = app.query_one(ChatPane)
        chat.current.sampling.update(max_tokens=8)
        await send(pilot, "Say hello.")
        await wait_for(pilot, lambda: len(app.query(MessageView)) == 2 and chat.stream is None)
        first_id = chat.current.id
        await pilot.press("ctrl+n")
        chat.current.sampling.update(max_tokens=8)  # a reply of up to 256 sampled tokens took 20 s
        await send(pilot, "Second chat here.")
        await wait_for(pilot, lambda: chat.stream is None and len(app.query(MessageView)) == 2)
    # A new app on the same store lists both, newest first; picking the older one shows its messages.
    again = make_app(store=store, load=False)
    async with again.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert [str(label.render()) for label in again.query("#conv-list Label")] == ["Second chat here.", "Say hello."]
        again.query_one("#conv-list", ListView).focus()
        await pilot.press("down", "enter")
        title = again.query_one("#chat-title", Static)
        await wait_for(pilot, lambda: str(title.render()).startswith("Say hello."))
        assert again.query_one(ChatPane).current.id == first_id
        await wait_for(pilot, lambda: len(again.query(MessageView)) == 2)
        views = list(again.query(MessageView))
        assert [str(v.query_one(".role", Label).render()) for v in views] == ["You", "Assistant"]
        assert views[0].query_one(Markdown).source == "Say hello."
        assert views[1].query_one(Markdown).source.strip()


async def test_follow_up_reuses_the_conversation_prefix(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.host.ready)
        chat = app.query_one(ChatPane)
        chat.current.sampling.update(max_tokens=16, temperature=0)
        await send(pilot, "What is DNA?")
        await wait_for(pilot, lambda: chat.stream is None and len(app.query(MessageView)) == 2)
        await send(pilot, "And RNA?")
        await wait_for(pilot, lambda: chat.stream is None and len(app.query(MessageView)) == 4)
        assert chat.current.messages[-1].stats["cached"] > 20
        assert "reused" in str(app.query(MessageView).last().query_one(".reply-stats").render())


async def test_a_prompt_over_the_context_is_a_notification_and_nothing_is_lost(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await wait_for(pilot, lambda: app.host.ready)
        long = "word " * 1500
        await send(pilot, long)
        await wait_for(pilot, lambda: any("context holds" in m for m in toasts(app, "Cannot send")))
        assert app.query_one("#prompt", Input).value == long.strip()
        assert len(app.query(MessageView)) == 0
