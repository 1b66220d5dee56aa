"""Models and Stats tabs with the real model."""

from textual.widgets import DataTable, Input, Static

from edge_infer.tui.screens.load_model import LoadModelScreen
from edge_infer.tui.widgets.chat import ChatPane

from .conftest import toasts, wait_for, wait_loaded
from .test_chat import send


async def test_models_tab_lists_installed_and_loads_with_a_plan(make_app, monkeypatch, smollm2_path):
    # The real store holds the provisioned catalog models.
    monkeypatch.setenv("EDGE_INFER_MODELS", str(smollm2_path.parent.parent))
    app = make_app(load=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("f2")
        await pilot.pause()
        table = app.query_one("#installed", DataTable)
        labels = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
        assert "smollm2:Q4_1" in labels and "gemma3:Q4_K_M" in labels
        table.move_cursor(row=labels.index("smollm2:Q4_1"))
        app.query_one("#load-model").press()
        await wait_for(pilot, lambda: isinstance(app.screen, LoadModelScreen))

        def shown() -> str:
            return str(app.screen.query_one("#plan", Static).render())

        await wait_for(pilot, lambda: "weights" in shown())
        plan = shown()
        assert "weights" in plan and "KV" in plan and "MiB" in plan
        assert "where: CPU: 31 layers" in plan  # no GPU device in this process: every layer on the CPU
        ctx = app.screen.query_one("#l-ctx", Input)
        ctx.value = "1536"
        assert "1536" not in plan  # the plan follows the inputs ...
        await wait_for(pilot, lambda: shown() != plan)  # ... and changes with them
        app.screen.query_one("#load").press()
        await wait_loaded(pilot, app)
        assert app.host.current.settings.ctx == 1536 and app.host.current.name == "smollm2:Q4_1"


async def test_bad_model_is_a_notification_not_a_crash(make_app, tmp_path):
    from edge_infer.config import EngineSettings

    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"not a model at all")
    app = make_app(load=False)
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        app.load_model(str(bad), EngineSettings(ctx=512, parallel=1))
        await wait_for(pilot, lambda: any("GGUF" in m for m in toasts(app, "Cannot load model")))
        assert not app.host.ready and app.is_running


async def test_stats_tab_follows_a_chat_reply(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_loaded(pilot, app)
        chat = app.query_one(ChatPane)
        chat.current.sampling.update(max_tokens=200, temperature=0.7, seed=1)
        await send(pilot, "Tell me a story about a cat.")
        await pilot.press("f4")
        stats = app.query_one("#stats-pane")
        await wait_for(pilot, lambda: max(stats.decode_history) > 0)
        await wait_for(pilot, lambda: chat.stream is None)
        stats.refresh_stats()
        text = str(app.query_one("#latency", Static).render())
        assert "TTFT p50" in text and "requests 1" in text
        assert "MiB" in str(app.query_one("#rss-text").render())
