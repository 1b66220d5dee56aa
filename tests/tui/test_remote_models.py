"""Remote models of the models config in the app: a row on the Server tab, a line per server
on the Stats tab; a config the app cannot use is said, and the app opens anyway."""

from textual.widgets import DataTable, Static

from tests.remote.standin import StandIn

from .conftest import host_rows, toasts, wait_for


async def test_a_remote_model_is_listed_beside_local_ones(make_app, tmp_path, monkeypatch):
    remote = StandIn()
    try:
        config = tmp_path / "models.toml"
        config.write_text(f'[models.big]\nremote = ["{remote.url}"]\nhealth_interval = 0.3\n')
        monkeypatch.setenv("EDGE_INFER_MODELS_CONFIG", str(config))
        app = make_app(load=False)
        async with app.run_test(size=(120, 40), notifications=True) as pilot:
            await pilot.press("f3")
            await wait_for(pilot, lambda: "big" in host_rows(app))
            assert host_rows(app)["big"]["state"] == "⇄ remote, 1/1 up"
            table = app.query_one("#host-models", DataTable)
            table.focus()
            table.move_cursor(row=list(host_rows(app)).index("big"))
            await pilot.press("l")
            await wait_for(pilot, lambda: any("is served by" in t for t in toasts(app)))
            await pilot.press("f4")
            await wait_for(pilot, lambda: f"remote big · {remote.url}: up" in
                           str(app.query_one("#remotes", Static).render()))
            remote.stop()  # it goes away: the next health check takes it out
            await wait_for(pilot, lambda: "out (health check" in str(app.query_one("#remotes", Static).render()))
            await pilot.press("f3")
            await wait_for(pilot, lambda: host_rows(app)["big"]["state"] == "⇄ remote, 0/1 up")
    finally:
        remote.stop()


async def test_a_models_config_the_app_cannot_use_is_said(make_app, tmp_path, monkeypatch):
    config = tmp_path / "models.toml"
    config.write_text('[models.big]\nremote = ["http://127.0.0.1:9/v1"]\napi_key_env = "NO_SUCH_KEY_HERE"\n')
    monkeypatch.setenv("EDGE_INFER_MODELS_CONFIG", str(config))
    monkeypatch.delenv("NO_SUCH_KEY_HERE", raising=False)
    app = make_app(load=False)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await wait_for(pilot, lambda: toasts(app, "Models config not used"))
        assert "NO_SUCH_KEY_HERE is not set" in toasts(app, "Models config not used")[0]
        assert not app.host.remotes


def test_a_model_whose_workers_were_lost_reads_unavailable():
    from edge_infer.tui.widgets.host_models import row_cells

    cells = row_cells({"name": "big", "state": "unavailable", "path": "/m/big.gguf", "error": "worker gone"})
    assert cells[:2] == ("big", "✖ unavailable")
