"""The Chat tab in a real (headless) terminal with the real SmolLM2."""

import threading

from textual.widgets import Input, Label, ListView, Markdown, OptionList, Static, TabbedContent

from edge_infer.tui.conversations import ConversationStore
from edge_infer.tui.screens.pick_model import ModelPickerScreen
from edge_infer.tui.widgets.chat import ChatPane, MessageView

from .conftest import toasts, wait_for, wait_loaded


async def ready_chat(pilot, sampling: dict):
    """The chat pane once the model is loaded, its conversation sampling as given."""
    app = pilot.app
    await wait_loaded(pilot, app)
    chat = app.query_one(ChatPane)
    chat.current.sampling.update(**sampling)
    return chat


async def send(pilot, text):
    app = pilot.app
    prompt = app.query_one("#prompt", Input)
    prompt.focus()
    prompt.value = text
    await pilot.press("enter")


async def test_chat_streams_a_reply_with_its_stats(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_loaded(pilot, app)
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
        await wait_loaded(pilot, app)
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
        assert [e["active"] for e in app.host.listing()] == [0]  # the cancelled reply let go of its lease


async def test_conversations_persist_and_restore(make_app, tmp_path):
    store = ConversationStore(tmp_path / "conversations")
    app = make_app(store=store)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_loaded(pilot, app)
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
        chat = await ready_chat(pilot, dict(max_tokens=16, temperature=0))
        await send(pilot, "What is DNA?")
        await wait_for(pilot, lambda: chat.stream is None and len(app.query(MessageView)) == 2)
        await send(pilot, "And RNA?")
        await wait_for(pilot, lambda: chat.stream is None and len(app.query(MessageView)) == 4)
        assert chat.current.messages[-1].stats["cached"] > 20
        assert "reused" in str(app.query(MessageView).last().query_one(".reply-stats").render())


async def test_a_saved_conversation_reopened_in_a_new_app_restores_its_history_from_disk(
        make_app, tmp_path, monkeypatch):
    """Quit the app, open it again, pick the conversation and send its next turn: the history
    comes back from the disk tier (the reply's stats say how many tokens were reused)."""
    from edge_infer.config import EngineSettings

    monkeypatch.setenv("EDGE_INFER_KV_CACHE", str(tmp_path / "kv"))
    store = ConversationStore(tmp_path / "conversations")
    settings = EngineSettings(ctx=1024, parallel=4, n_threads=2, disk_cache="1GiB")
    app = make_app(store=store, settings=settings)
    async with app.run_test(size=(100, 30)) as pilot:
        chat = await ready_chat(pilot, dict(max_tokens=8, temperature=0))
        await send(pilot, " ".join(f"Crate {i} holds {i * 3} apples." for i in range(40)) + " Which crate holds 9?")
        await wait_for(pilot, lambda: chat.stream is None and len(app.query(MessageView)) == 2)
        history = len(app.host.get().tokenize_messages(chat.current.chat_messages()[:-1]))
    assert list((tmp_path / "kv").glob("*.kv"))  # the app closed its model: the conversation is on disk

    again = make_app(store=store, settings=settings)
    async with again.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: again.host.ready)
        again.query_one("#conv-list", ListView).focus()
        await pilot.press("enter")
        chat = again.query_one(ChatPane)
        await wait_for(pilot, lambda: len(again.query(MessageView)) == 2)
        chat.current.sampling.update(max_tokens=8, temperature=0)
        await send(pilot, "And crate 5?")
        await wait_for(pilot, lambda: chat.stream is None and len(again.query(MessageView)) == 4)
        assert chat.current.messages[-1].stats["cached"] >= history
        assert "reused" in str(again.query(MessageView).last().query_one(".reply-stats").render())
        assert again.host.get().snapshot().disk_cache_hits_total == 1


async def test_a_prompt_over_the_context_is_a_notification_and_nothing_is_lost(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await wait_loaded(pilot, app)
        long = "word " * 1500
        await send(pilot, long)
        await wait_for(pilot, lambda: any("context holds" in m for m in toasts(app, "Cannot send")))
        assert app.query_one("#prompt", Input).value == long.strip()
        assert len(app.query(MessageView)) == 0


async def test_a_conversation_switches_model_and_the_reply_comes_from_it(make_app, gemma_store, tmp_path):
    app = make_app()  # SmolLM2 is loaded and the default; Gemma 3 is installed, not loaded
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await wait_loaded(pilot, app)
        smol = app.host.current
        chat = app.query_one(ChatPane)
        chat.current.sampling.update(max_tokens=8, temperature=0)
        title = app.query_one("#chat-title", Static)
        assert f"·  {smol.name} · ctx 1024" in str(title.render())

        # Ctrl+O: the picker lists the loaded model and the installed one.
        await pilot.press("ctrl+o")
        await wait_for(pilot, lambda: isinstance(app.screen, ModelPickerScreen))
        names = [e["name"] for e in app.screen.entries]
        assert names == [smol.name, "gemma3"]
        app.screen.query_one(OptionList).highlighted = names.index("gemma3")
        await pilot.press("enter")
        await wait_for(pilot, lambda: chat.current.model == "gemma3")
        assert "gemma3 (loads when you send)" in str(title.render())

        # Sending loads Gemma on demand in a worker thread; held here so the wait shows.
        go = threading.Event()
        real_open = app.host._open_engine
        app.host._open_engine = lambda *a: go.wait(30) and real_open(*a)
        await send(pilot, "Say hi.")
        assert chat.loading == "gemma3" and "loading gemma3…" in str(title.render())
        assert [(e["name"], e["state"]) for e in app.host.listing()][1] == ("gemma3", "loading")
        go.set()
        await wait_for(pilot, lambda: len(app.query(MessageView)) == 2 and chat.stream is None
                       and app.query(MessageView).last().message.stats)
        gemma = app.host.find("gemma3")
        assert gemma is not None and gemma.engine is not smol.engine
        assert gemma.engine.snapshot().requests_total == 1  # the reply came from Gemma
        assert smol.engine.snapshot().requests_total == 0
        reply = app.query(MessageView).last()
        assert reply.message.stats["model"] == "gemma3" and reply.message.content.strip()
        assert str(reply.query_one(".reply-stats").render()).startswith("gemma3 · TTFT")
        assert f"·  gemma3 · ctx 1024" in str(title.render())
        # The lease ended with the stream: nothing holds either model.
        assert chat.lease is None and [e["active"] for e in app.host.listing()] == [0, 0]
        # Both stay loaded; the default is still SmolLM2, and a new chat uses it.
        assert app.host.current is smol and sorted(app.host.names()) == sorted([smol.name, "gemma3"])
        await pilot.press("ctrl+n")
        assert f"·  {smol.name} · ctx 1024" in str(title.render())
    # The conversation remembers its model.
    saved = {c.title: c for c in ConversationStore(tmp_path / "conversations").list()}
    assert saved["Say hi."].model == "gemma3"


async def test_a_model_that_cannot_load_is_a_notification_and_the_message_comes_back(make_app, gemma_store):
    from edge_infer.host import Budget

    app = make_app()
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await wait_loaded(pilot, app)
        chat = app.query_one(ChatPane)
        chat.current.model = "gemma3"
        app.host.budget = Budget(ram=200 << 20)  # SmolLM2 fits; Gemma 3 alone does not
        await send(pilot, "Hello there.")
        await wait_for(pilot, lambda: any("needs" in t for t in toasts(app, "Cannot load gemma3")))
        assert app.query_one("#prompt", Input).value == "Hello there."
        assert len(app.query(MessageView)) == 0 and chat.loading is None
        assert app.host.names() == [app.host.current.name]


async def test_a_reply_seen_as_done_already_holds_its_text(make_app, monkeypatch):
    """The last render of a reply is awaited after its last token; a reply that shows as done
    (no stream, stats set) must hold its text by then. A loaded full run once saw '' there."""
    import asyncio

    from edge_infer.tui.widgets.reply_parts import LiveReply

    real_finish = LiveReply.finish

    async def slow_finish(self):
        await asyncio.sleep(0.5)  # a busy machine's last Markdown render
        return await real_finish(self)

    monkeypatch.setattr(LiveReply, "finish", slow_finish)
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        chat = await ready_chat(pilot, dict(max_tokens=6, temperature=0))
        await send(pilot, "Say hi.")
        await wait_for(pilot, lambda: len(app.query(MessageView)) == 2 and chat.stream is None
                       and app.query(MessageView).last().message.stats)
        assert app.query(MessageView).last().message.content.strip()


def test_the_model_picker_lists_a_model_whose_engine_failed():
    """It was a KeyError (no ram_bytes) that closed the picker, as /v1/models once answered 500."""
    from edge_infer.tui.screens.pick_model import describe

    failed = {"name": "broken", "state": "unavailable", "path": "/m/broken.gguf", "size_bytes": 3 << 20,
              "error": "llama.cpp could not load it"}
    text = describe(failed)
    assert "broken" in text and "unavailable" in text and "3.0 MiB" in text and "could not load" in text
    assert "not loaded" in describe({"name": "idle", "state": "unloaded", "path": "/m/idle.gguf", "size_bytes": 0})
