import pytest

from edge_infer.config import EngineSettings


@pytest.fixture
def make_app(smollm2_path, edge_home, tmp_path):
    """An app on the real SmolLM2 with conversations in a temporary data dir."""
    from edge_infer.tui.app import EdgeInferApp
    from edge_infer.tui.conversations import ConversationStore

    def make(load=True, store=None):
        return EdgeInferApp(str(smollm2_path), EngineSettings(ctx=1024, parallel=4, n_threads=2),
                            conversations=store or ConversationStore(tmp_path / "conversations"),
                            load_model=load)
    return make


async def wait_for(pilot, condition, timeout=60.0):
    import asyncio
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for the app")
        await pilot.pause(0.05)
        await asyncio.sleep(0)
