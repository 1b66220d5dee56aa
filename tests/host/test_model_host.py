"""The model host: names reach the right engine, a new model replaces the old one only
once it loaded, unload and close free engines. Fake engines through the host's seams
(locate, open_engine); the server on a real host is in test_served_host.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from edge_infer.config import EngineSettings
from edge_infer.errors import ModelFileError, ModelNotFoundError
from edge_infer.host import ModelHost, ModelNotLoadedError


class FakeEngine:
    def __init__(self, path: Path, settings: EngineSettings, name: str):
        self.path, self.settings, self.name = path, settings, name
        self.closed = False

    def close(self) -> None:
        self.closed = True


def locate(spec):
    if spec is None:
        return Path("/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"), "smollm2"
    if spec == "broken":
        raise ModelFileError("broken.gguf is truncated")
    return Path(f"/models/{spec}/{spec}.gguf"), spec


def opened(path, settings, name):
    if name == "fails-to-load":
        raise RuntimeError("llama.cpp could not load it")
    return FakeEngine(path, settings, name)


@pytest.fixture
def host():
    with ModelHost(locate=locate, open_engine=opened) as h:
        yield h


def test_nothing_loaded(host):
    assert not host.ready and host.loaded() == [] and host.current is None
    assert host.description == "no model loaded"
    with pytest.raises(ModelNotLoadedError, match="serves no model"):
        host.get()


def test_the_default_model_answers_to_its_name_and_file(host):
    loaded = host.load(None, EngineSettings(ctx=1024, parallel=2, n_threads=2))
    engine = loaded.engine
    assert host.get() is engine and host.get("smollm2") is engine
    assert host.get("SmolLM2-135M-Instruct.Q4_1") is engine          # the file's stem
    assert host.get("SmolLM2-135M-Instruct.Q4_1.gguf") is engine     # and its name
    assert host.names() == ["smollm2"]
    assert host.description == "smollm2 · ctx 1024 · 2 slots · 2 threads"


def test_an_unknown_name_says_what_is_served(host):
    host.load("gemma3", EngineSettings())
    with pytest.raises(ModelNotLoadedError) as err:
        host.get("llama-3-70b")
    assert isinstance(err.value, ModelNotFoundError)
    assert str(err.value) == "the model 'llama-3-70b' does not exist; this server serves 'gemma3'"
    with pytest.raises(ModelNotLoadedError) as err:
        host.get("x" * 10_000)
    assert len(str(err.value)) < 300                              # never echoes megabytes


def test_a_new_model_replaces_the_old_once_it_loaded(host):
    first = host.load("smollm2", EngineSettings()).engine
    second = host.load("gemma3", EngineSettings(), name="gemma").engine
    assert first.closed and not second.closed
    assert host.get() is second and host.names() == ["gemma"]
    with pytest.raises(ModelNotLoadedError):
        host.get("smollm2")


@pytest.mark.parametrize("spec, error", [("broken", ModelFileError), ("fails-to-load", RuntimeError)])
def test_a_failed_load_keeps_the_model_that_was_there(host, spec, error):
    kept = host.load("smollm2", EngineSettings()).engine
    with pytest.raises(error):
        host.load(spec, EngineSettings())
    assert host.get() is kept and not kept.closed


def test_unload_and_close_free_the_engines(host):
    engine = host.load("smollm2", EngineSettings()).engine
    assert host.unload("somebody-else") is False and not engine.closed
    assert host.unload("smollm2") is True and engine.closed and not host.ready
    again = host.load("gemma3", EngineSettings()).engine
    host.close()
    assert again.closed and host.loaded() == []


def test_adopt_serves_an_engine_built_elsewhere(host):
    engine = FakeEngine(Path("/tmp/x.gguf"), EngineSettings(ctx=512), "bench-model")
    entry = host.adopt(engine, engine.path, aliases=("bm",))
    assert entry.settings.ctx == 512                              # the engine's own settings
    assert host.get("bench-model") is engine and host.get("bm") is engine and host.get("x") is engine
