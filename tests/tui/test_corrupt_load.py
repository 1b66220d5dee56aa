"""Loading a broken GGUF from the app: a one-line notification each, and the loaded model
keeps working."""

from __future__ import annotations

from edge_infer.config import EngineSettings
from tests.hardening.corrupt_gguf import make_corrupt_ggufs
from tests.tui.conftest import toasts, wait_for


async def test_twenty_corrupt_ggufs_are_refused_one_line_each(make_app, smollm2_path, tmp_path):
    files = make_corrupt_ggufs(smollm2_path, tmp_path / "corrupt")
    assert len(files) >= 20
    app = make_app()
    async with app.run_test(notifications=True) as pilot:
        await wait_for(pilot, lambda: app.host.ready and f"{app.host.current.name} is ready." in toasts(app))
        loaded = app.host.get()
        refusals = []
        for path in files:
            app.clear_notifications()
            await wait_for(pilot, lambda: not toasts(app))
            app.load_model(str(path), EngineSettings(ctx=256, parallel=1, n_threads=2))
            await wait_for(pilot, lambda: toasts(app, "Cannot load model"), timeout=60)
            shown = toasts(app)
            assert len(shown) == 1, (path.name, shown)  # one notification for each file, nothing else
            refusals += toasts(app, "Cannot load model")
        assert len(refusals) == len(files), refusals
        assert all("\n" not in m and "Traceback" not in m for m in refusals), refusals
        assert app.host.get() is loaded and loaded.alive  # the good model was never replaced
        assert app.is_running
