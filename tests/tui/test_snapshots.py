"""Snapshot tests of each tab in a deterministic state (no live model: fixed data).

Update after an intended UI change with: pytest tests/tui/test_snapshots.py --snapshot-update
"""

import pytest

from edge_infer.config import EngineSettings
from edge_infer.engine.stats import EngineSnapshot, RequestSnapshot
from edge_infer.tui.conversations import Conversation, ConversationStore, Message
from tests.doubles import EngineDouble

SIZE = (100, 30)


class FixedPlan:
    cpu_bytes, gpu_bytes = 230 * 2**20, 0  # what the Server tab's model table shows as RAM


class FixedEngine(EngineDouble):
    """Stands in for a loaded engine: the Stats tab renders this snapshot."""
    name = "smollm2:Q4_1"
    plan = FixedPlan()

    def snapshot(self):
        return EngineSnapshot(
            model=self.name, n_slots=4, slots_busy=2, running=2, queued=1, kv_cells_used=900,
            kv_cells_total=4096, rss_bytes=400 * 2**20, weights_bytes=92 * 2**20, kv_bytes=90 * 2**20,
            requests_total=12, prompt_tokens_total=800, prompt_eval_tokens_total=300,
            generated_tokens_total=1500, decode_tok_s=150.0, prefill_tok_s=900.0, ttft_p50_s=0.08,
            ttft_p95_s=0.3, requests=(
                RequestSnapshot("req-11", "chat", "decode", 0, 120, 100, 40, 75.0),
                RequestSnapshot("req-12", "api", "prefill", 1, 300, 0, 0, 0.0),
                RequestSnapshot("req-13", "api", "queued", -1, 50, 0, 0, 0.0)))


@pytest.fixture
def fixed_app(tmp_path, edge_home, monkeypatch, smollm2_path):
    import psutil

    from edge_infer.store.store import ModelStore

    folder = edge_home / "models" / "smollm2"
    folder.mkdir(parents=True)
    (folder / smollm2_path.name).symlink_to(smollm2_path)
    ModelStore().record(folder / smollm2_path.name, name="SmolLM2-135M-Instruct", quant="Q4_1", source="mirror",
                        alias="smollm2")

    from edge_infer.tui.app import EdgeInferApp

    from pathlib import Path

    from edge_infer import paths
    monkeypatch.setattr(paths, "data_dir", lambda: Path("/home/user/.local/share/edge-infer"))
    monkeypatch.setattr(psutil, "virtual_memory", lambda: type("vm", (), {"total": 16 * 2**30,
                                                                          "available": 8 * 2**30})())
    store = ConversationStore(tmp_path / "conversations")
    conv = Conversation(id="fixed", title="What is DNA?", updated_at=1.0)
    conv.messages = [Message("user", "What is DNA?"),
                     Message("assistant", "**DNA** is the molecule that carries genetic instructions.\n\n"
                                          "- double helix\n- four bases: A, C, G, T",
                             {"ttft_s": 0.061, "decode_tok_s": 102.4, "tokens": 24, "cached": 0, "finish": "stop"})]
    store.save(conv)

    def make():
        app = EdgeInferApp(settings=EngineSettings(ctx=1024, parallel=4, n_threads=2), conversations=store,
                           load_model=False)
        app.host.adopt(FixedEngine(), smollm2_path, app.default_settings, name="smollm2:Q4_1")
        return app
    return make


async def _stats_history(pilot):
    pane = pilot.app.query_one("#stats-pane")
    pane.poller.pause()  # a fixed picture: no more samples while the snapshot is taken
    await pilot.pause()  # let the tab switch lay the pane out (hidden panes skip redraws)
    pane.decode_history.extend([100, 120, 150, 160, 150] * 4)
    pane.refresh_stats()
    await pilot.pause()


async def _steady_cursor(pilot):
    # The focused prompt's cursor blinks: a picture taken in its off half differed from the
    # stored one (where it shows), so it stays on for the snapshot.
    pilot.app.query_one("#prompt").cursor_blink = False
    await pilot.pause()


def test_chat_tab(snap_compare, fixed_app):
    assert snap_compare(fixed_app(), terminal_size=SIZE, run_before=_steady_cursor)


def test_chat_tab_at_80x24(snap_compare, fixed_app):
    assert snap_compare(fixed_app(), terminal_size=(80, 24), run_before=_steady_cursor)


def test_models_tab(snap_compare, fixed_app):
    assert snap_compare(fixed_app(), terminal_size=SIZE, press=["f2"])


async def _busy_model(pilot):
    # A reply in flight: the model table shows "busy" rather than an idle time that ticks.
    pilot.app.host.try_acquire()
    pilot.app.query_one("HostModels").poller.pause()
    pilot.app.query_one("HostModels").refresh_table()
    await pilot.pause()


def test_server_tab(snap_compare, fixed_app):
    assert snap_compare(fixed_app(), terminal_size=SIZE, press=["f3"], run_before=_busy_model)


def test_stats_tab(snap_compare, fixed_app):
    assert snap_compare(fixed_app(), terminal_size=SIZE, press=["f4"], run_before=_stats_history)


def test_models_tab_at_80x24(snap_compare, fixed_app):
    assert snap_compare(fixed_app(), terminal_size=(80, 24), press=["f2"])
