import pytest

from edge_infer.config import EngineSettings


@pytest.fixture
def make_app(smollm2_path, edge_home, tmp_path):
    """An app on the real SmolLM2 with conversations in a temporary data dir."""
    from edge_infer.tui.app import EdgeInferApp
    from edge_infer.tui.conversations import ConversationStore

    def make(load=True, store=None, settings=None):
        return EdgeInferApp(str(smollm2_path), settings or EngineSettings(ctx=1024, parallel=4, n_threads=2),
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


async def wait_loaded(pilot, app, timeout=60.0):
    """Until the app shows the loaded model: the host is ready on the loading thread a moment
    before the app's own callback (call_from_thread) updates the title and the tabs."""
    await wait_for(pilot, lambda: app.host.ready and app.sub_title == app.host.description, timeout)


def toasts(app, title: str | None = None) -> list[str]:
    """The notifications on screen now, oldest first, as the user reads them: "title\nmessage"
    (the message alone when it has no title); with `title`, the messages of the toasts with that
    title. Toasts leave when their timeout ends: wait for one with `wait_for` while it is shown.
    The app must run with `run_test(notifications=True)`: Textual's tests show no toasts otherwise."""
    if not app.screen.query("ToastRack"):
        raise AssertionError("no toasts on this screen: run the app with run_test(notifications=True)")
    shown = [str(toast.render()) for toast in app.screen.query("Toast")]
    if title is None:
        return shown
    return [text[len(title) + 1:] for text in shown if text.startswith(title + "\n")]


from tests.store.conftest import SMOL_FILE, SMOL_REPO, hub  # noqa: E402,F401  (the local fake hub)


@pytest.fixture
def tui_hub(hub, smollm2_path):
    """The fake hub with the real SmolLM2 file (and listed-only levels for the verdicts)."""
    hub.add_repo(SMOL_REPO, {SMOL_FILE: smollm2_path, "README.md": b"# SmolLM2\n"}, downloads=100,
                 listed_only={"SmolLM2-135M-Instruct.Q8_0.gguf": 144_811_072,
                              "SmolLM2-135M-Instruct.Q2_K.gguf": 88_201_792}, template=smollm2_path)
    return hub


@pytest.fixture
def smol_store(edge_home, smollm2_path):
    """The temporary store with SmolLM2 in it (a symlink to the real file)."""
    from edge_infer.store.store import ModelStore

    folder = edge_home / "models" / "smollm2"
    folder.mkdir(parents=True)
    (folder / smollm2_path.name).symlink_to(smollm2_path)
    return ModelStore().record(folder / smollm2_path.name, name="SmolLM2-135M-Instruct", quant="Q4_1",
                               source="mirror", alias="smollm2")


@pytest.fixture
def gemma_store(edge_home, gemma3_path):
    """The temporary store with Gemma 3 in it (a symlink to the real file): the host lists it
    as "gemma3" and loads it on demand."""
    from edge_infer.store.store import ModelStore

    folder = edge_home / "models" / "gemma3"
    folder.mkdir(parents=True)
    (folder / gemma3_path.name).symlink_to(gemma3_path)
    return ModelStore().record(folder / gemma3_path.name, name="Gemma-3-270M", quant="Q4_K_M",
                               source="mirror", alias="gemma3")


def host_rows(app) -> dict[str, dict[str, str]]:
    """The Server tab's model table as the user reads it: model name -> {column: text}."""
    from textual.widgets import DataTable

    from edge_infer.tui.widgets.host_models import COLUMNS

    table = app.query_one("#host-models", DataTable)
    out = {}
    for key in table.rows:
        cells = [str(c) for c in table.get_row(key)]
        out[cells[0]] = dict(zip((c for c, _ in COLUMNS), cells))
    return out
