"""Loading a broken GGUF from the app: a one-line notification each, and the loaded model
keeps working."""

from __future__ import annotations

from edge_infer.config import EngineSettings
from tests.hardening.corrupt_gguf import make_corrupt_ggufs
from tests.tui.conftest import wait_for


async def test_twenty_corrupt_ggufs_are_refused_one_line_each(make_app, smollm2_path, tmp_path):
    files = make_corrupt_ggufs(smollm2_path, tmp_path / "corrupt")
    assert len(files) >= 20
    app = make_app()
    async with app.run_test() as pilot:
        await wait_for(pilot, lambda: app.host.ready)
        loaded = app.host.get()
        for i, path in enumerate(files):
            app.load_model(str(path), EngineSettings(ctx=256, parallel=1, n_threads=2))
            await wait_for(pilot, lambda: sum(n.title == "Cannot load model" for n in app._notifications) > i
                           or len(app._notifications) > 50, timeout=60)
        refusals = [str(n.message) for n in app._notifications if n.title == "Cannot load model"]
        assert len(refusals) == len(files), refusals
        assert all("\n" not in m and "Traceback" not in m for m in refusals), refusals
        assert app.host.get() is loaded and loaded.alive  # the good model was never replaced
        assert app.is_running
