"""The Models tab against the local fake hub and a temporary store: search, quant levels,
downloads that survive tab switches and app restarts, quantize, delete, the ladder chart."""

import io
import json

from rich.console import Console
from textual.widgets import Button, DataTable, Static, TabbedContent

from edge_infer.config import EngineSettings
from edge_infer.tui.screens.dialogs import ConfirmScreen
from edge_infer.tui.screens.quantize import QuantizeScreen
from edge_infer.tui.widgets.downloads import DownloadRow

from .conftest import SMOL_REPO, toasts, wait_for


def labels(app):
    table = app.query_one("#installed", DataTable)
    return [str(table.get_row_at(i)[0]) for i in range(table.row_count)]


async def open_hub(pilot):
    await pilot.press("f2")
    pilot.app.query_one("#models-tabs", TabbedContent).active = "m-hub"
    await pilot.pause()


async def list_repo(pilot, query="smollm2"):
    app = pilot.app
    await open_hub(pilot)
    app.query_one("#hub-query").value = query
    app.query_one("#hub-search", Button).press()
    results = app.query_one("#hub-results", DataTable)
    await wait_for(pilot, lambda: results.row_count > 0, timeout=30)
    results.focus()
    await pilot.press("enter")
    quants = app.query_one("#hub-quants", DataTable)
    await wait_for(pilot, lambda: quants.row_count > 0, timeout=30)
    return quants


async def test_search_lists_quant_levels_with_verdicts(make_app, tui_hub):
    app = make_app(load=False)
    async with app.run_test(size=(100, 30)) as pilot:
        quants = await list_repo(pilot)
        rows = {str(quants.get_row_at(i)[0]): [str(c) for c in quants.get_row_at(i)] for i in range(quants.row_count)}
        assert set(rows) == {"Q2_K", "Q4_1", "Q8_0"}
        assert rows["Q4_1"][4] in ("fits", "tight", "does not fit") and "MiB" in rows["Q4_1"][1]


async def test_unreachable_hub_is_a_notification(make_app, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    app = make_app(load=False)
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await open_hub(pilot)
        app.query_one("#hub-query").value = "smollm2"
        app.query_one("#hub-search", Button).press()
        await wait_for(pilot, lambda: toasts(app, "Hub search failed"), timeout=30)
        assert app.is_running


async def test_download_shows_progress_survives_tab_switches_and_installs(make_app, tui_hub):
    tui_hub.throttle = 30 * 2**20   # bytes/s: a few seconds for SmolLM2's 94 MiB
    app = make_app(load=False)
    async with app.run_test(size=(100, 30)) as pilot:
        quants = await list_repo(pilot)
        quants.move_cursor(row=[str(quants.get_row_at(i)[0]) for i in range(quants.row_count)].index("Q4_1"))
        app.query_one("#hub-download", Button).press()
        await wait_for(pilot, lambda: app.query(DownloadRow) and app.query_one(DownloadRow).have > 0)
        row = app.query_one(DownloadRow)
        assert "MiB/s" in str(row.query_one(".download-status").render())
        # Other tabs while it downloads: it keeps going.
        await pilot.press("f1")
        seen = row.have
        await wait_for(pilot, lambda: row.have > seen + 4 * 2**20)
        assert app.query_one("#tabs", TabbedContent).active == "chat"
        await pilot.press("f4")
        await wait_for(pilot, lambda: row.state == "done", timeout=120)
        await pilot.press("f2")
        await wait_for(pilot, lambda: f"{SMOL_REPO}:Q4_1" in labels(app))


async def test_download_cut_by_quitting_resumes_at_the_next_start(make_app, tui_hub, edge_home):
    from edge_infer.store.partials import list_partials
    from edge_infer.store.store import ModelStore

    tui_hub.throttle = 8 * 2**20
    app = make_app(load=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await list_repo(pilot)
        app.query_one("#downloads").start(SMOL_REPO, "Q4_1")
        await wait_for(pilot, lambda: app.query(DownloadRow) and app.query_one(DownloadRow).have > 2**20)
    # The worker stops at its next chunk; the partial file stays in the store.
    import time
    deadline = time.monotonic() + 20
    sizes = []
    while time.monotonic() < deadline:
        parts = list_partials(ModelStore().root)
        sizes.append(parts[0].have if parts else -1)
        if len(sizes) > 3 and sizes[-1] == sizes[-4] > 0:
            break
        time.sleep(0.2)
    kept = sizes[-1]
    assert kept > 0
    tui_hub.throttle = None
    tui_hub.reset_counters()
    again = make_app(load=False)
    async with again.run_test(size=(100, 30)) as pilot:
        await pilot.press("f2")
        await pilot.pause()
        row = again.query_one(DownloadRow)
        assert row.state == "paused" and row.have == kept
        assert "Resume" in str(row.query_one(".download-status").render())
        row.query_one(".download-resume", Button).press()
        await wait_for(pilot, lambda: row.state == "done", timeout=120)
        await wait_for(pilot, lambda: f"{SMOL_REPO}:Q4_1" in labels(again))
    assert tui_hub.served() < ModelStore().installed()[0].size  # only the missing bytes travelled


async def test_stop_keeps_the_bytes_resume_finishes_and_discard_deletes(make_app, tui_hub):
    from edge_infer.store.partials import list_partials
    from edge_infer.store.store import ModelStore

    tui_hub.throttle = 8 * 2**20
    app = make_app(load=False)
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await list_repo(pilot)
        panel = app.query_one("#downloads")
        panel.start(SMOL_REPO, "Q4_1")
        await wait_for(pilot, lambda: app.query(DownloadRow) and app.query_one(DownloadRow).have > 2**20)
        row = app.query_one(DownloadRow)
        assert row.query_one(".download-stop", Button).display
        row.query_one(".download-stop", Button).press()
        await wait_for(pilot, lambda: row.state == "paused", timeout=30)
        assert "Resume" in str(row.query_one(".download-status").render())
        kept = list_partials(ModelStore().root)
        assert len(kept) == 1 and kept[0].have > 2**20 and not ModelStore().installed()
        # Resume in the same session: only the rest travels, then it installs.
        tui_hub.throttle = None
        tui_hub.reset_counters()
        row.query_one(".download-resume", Button).press()
        await wait_for(pilot, lambda: row.state == "done", timeout=120)
        await wait_for(pilot, lambda: f"{SMOL_REPO}:Q4_1" in labels(app))
        assert tui_hub.served() == ModelStore().installed()[0].size - kept[0].have

        # Stop another download and discard it: its bytes are gone and nothing is listed.
        tui_hub.throttle = 8 * 2**20
        panel.start(SMOL_REPO, "Q8_0")
        await wait_for(pilot, lambda: panel.row(SMOL_REPO, "Q8_0") and panel.row(SMOL_REPO, "Q8_0").have > 2**20)
        other = panel.row(SMOL_REPO, "Q8_0")
        other.query_one(".download-stop", Button).press()
        await wait_for(pilot, lambda: other.state == "paused", timeout=30)
        other.query_one(".download-discard", Button).press()
        await wait_for(pilot, lambda: not list_partials(ModelStore().root) and other not in panel.rows())
        await wait_for(pilot, lambda: f"Discarded the partial download of {SMOL_REPO}:Q8_0." in toasts(app))
        assert labels(app) == [f"{SMOL_REPO}:Q4_1"]


async def test_quantize_from_the_tab_adds_an_entry_and_refusals_are_notifications(make_app, smol_store):
    app = make_app(load=False)
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await pilot.press("f2")
        await pilot.pause()
        assert labels(app) == ["smollm2:Q4_1"]

        async def ask(allow: bool):
            app.query_one("#quantize-model", Button).press()
            await wait_for(pilot, lambda: isinstance(app.screen, QuantizeScreen))
            app.screen.query_one("#q-levels").select("Q8_0")
            app.screen.query_one("#q-allow").value = allow
            app.screen.query_one("#q-go", Button).press()
            await pilot.pause()

        await ask(allow=False)  # Q4_1 -> Q8_0 goes up in precision: the store refuses
        await wait_for(pilot, lambda: any("refusing to quantize" in m for m in toasts(app, "Quantize")))
        assert labels(app) == ["smollm2:Q4_1"]
        await ask(allow=True)
        await wait_for(pilot, lambda: "smollm2:Q8_0" in labels(app), timeout=180)
        await wait_for(pilot, lambda: any("Made smollm2:Q8_0" in m for m in toasts(app, "Quantize")))


async def test_delete_asks_and_refuses_the_loaded_model(make_app, smol_store):
    app = make_app(load=False)
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await pilot.press("f2")
        await pilot.pause()
        app.load_model(str(smol_store.path), EngineSettings(ctx=256, parallel=1, n_threads=2), name=smol_store.label)
        await wait_for(pilot, lambda: f"{smol_store.label} is ready." in toasts(app))
        app.query_one("#delete-model", Button).press()
        await wait_for(pilot, lambda: f"{smol_store.label} is loaded: unload it first (Server tab)." in toasts(app))
        assert not isinstance(app.screen, ConfirmScreen)
        app.host.unload()
        app.query_one("#delete-model", Button).press()
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        app.screen.query_one("#yes", Button).press()
        await wait_for(pilot, lambda: labels(app) == [])
        assert not smol_store.path.parent.exists()
        await wait_for(pilot, lambda: any(t.startswith(f"Deleted {smol_store.label} (") for t in toasts(app)))


async def test_ladder_chart_shows_a_saved_ladder(make_app, smol_store):
    from edge_infer.bench.ladder import ladder_path

    row = dict(label="smollm2:Q4_1", quant="Q4_1", path="x", file_size=98_000_000, bits_per_weight=5.0, load_s=0.1,
               rss_bytes=10, prefill_tok_s=900.0, decode_tok_s=120.0, perplexity=18.5, kl_mean=None, kl_p99=None,
               top1_agree=None, reference=True)
    q8 = dict(row, quant="Q8_0", label="smollm2:Q8_0", file_size=145_000_000, bits_per_weight=8.5,
              decode_tok_s=90.0, perplexity=18.1, kl_mean=0.01, kl_p99=0.1, top1_agree=0.97, reference=False)
    path = ladder_path("smollm2")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"model": "smollm2", "text_source": "t", "text_sha256": "0", "n_tokens": 256,
                                "prompt_tokens": 64, "threads": 2, "created_at": "2026-01-01T00:00",
                                "rows": [q8, row]}))
    app = make_app(load=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("f2")
        app.query_one("#models-tabs", TabbedContent).active = "m-ladder"
        await pilot.pause()
        table = app.query_one("#ladder-table", DataTable)
        assert [str(table.get_row_at(i)[0]) for i in range(table.row_count)] == ["Q4_1", "Q8_0"]
        # The bars as the user reads them: one line per level, smallest file first, each bar
        # scaled to the largest value of its column.
        console = Console(width=100, record=True, file=io.StringIO())
        console.print(app.query_one("#ladder-bars", Static).content)
        lines = [line.split() for line in console.export_text().splitlines() if line.strip()]
        assert lines[0] == ["size", "decode", "tok/s", "perplexity"]
        q4, q8 = lines[1], lines[2]
        assert q4[0] == "Q4_1" and q8[0] == "Q8_0"
        assert q4[4:6] == ["█" * 18, "120.0"] and q4[6:8] == ["█" * 18, "18.50"]
        assert q8[1] == "█" * 18 and q8[4:6] == ["█" * 14 + "░" * 4, "90.0"]
        assert q4[1:4] == ["█" * 12 + "░" * 6, "93.5", "MiB"]  # 98 MB of the largest, 145 MB
