"""The model host with fake engines through its seams (locate, find_source, open_engine,
footprint): names reach the right engine, installed models load on demand and once,
idle models make room least recently used first, busy and pinned ones never do,
keep_alive unloads, failures stay with the request that caused them. The server on a
real host with real models is in tests/server/test_many_models.py."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from edge_infer.config import EngineSettings
from edge_infer.errors import ModelFileError, ModelNotFoundError
from edge_infer.host import Budget, Footprint, HostBusyError, ModelDoesNotFitError, ModelHost, ModelNotLoadedError
from edge_infer.host.model_config import ModelsConfig
from edge_infer.host.sources import Source, names_of
from tests.doubles import EngineDouble

MiB = 1 << 20
SIZES = {"smollm2": 100, "gemma3": 300, "qwen": 250, "huge": 5000, "broken": 10, "fails-to-load": 10}


class FakeEngine(EngineDouble):
    def __init__(self, path: Path, settings: EngineSettings, name: str):
        super().__init__()
        self.path, self.settings, self.name = path, settings, name
        self.closed = False
        self.busy = 0  # requests the engine runs that hold no lease (the TUI's chat)
        # Its plan: what World.footprint planned for it before loading (nothing for others).
        self.plan = SimpleNamespace(cpu_bytes=SIZES.get(path.stem, 0) * MiB * settings.ctx // 4096, gpu_bytes=0)

    def snapshot(self):
        return SimpleNamespace(slots_busy=self.busy, queued=0)

    def close(self) -> None:
        self.closed = True


def path_of(name: str) -> Path:
    return Path(f"/models/{name}/{name}.gguf")


class World:
    """Installed models, their plans, and every engine opened."""

    def __init__(self, load_delay: float = 0.0):
        self.opened: list[FakeEngine] = []
        self.load_delay = load_delay

    def locate(self, spec):
        spec = spec or "smollm2"
        if spec not in SIZES:
            raise ModelNotFoundError(f"unknown model {spec!r}")
        return path_of(spec), spec

    def find_source(self, spec):
        base = spec.partition(":")[0]
        return Source(path_of(base), base, names_of(path_of(base), f"{base}:Q4")) if base in SIZES else None

    def list_sources(self):
        return [self.find_source(n) for n in ("gemma3", "qwen", "smollm2")]

    def footprint(self, path, settings):
        name = path.stem
        if name == "broken":
            raise ModelFileError("broken.gguf is truncated")
        return Footprint(SIZES[name] * MiB * settings.ctx // 4096)

    def open_engine(self, path, settings, name):
        time.sleep(self.load_delay)
        if name == "fails-to-load":
            raise RuntimeError("llama.cpp could not load it")
        engine = FakeEngine(path, settings, name)
        self.opened.append(engine)
        return engine

    def host(self, budget_mib: int = 10_000, **kwargs) -> ModelHost:
        return ModelHost(locate=self.locate, open_engine=self.open_engine, find_source=self.find_source,
                         list_sources=self.list_sources, footprint=self.footprint,
                         budget=Budget(ram=budget_mib * MiB), **kwargs)


@pytest.fixture
def world():
    return World()


@pytest.fixture
def host(world):
    with world.host() as h:
        yield h


def test_nothing_loaded(world):
    with world.host(on_demand=False) as host:
        assert not host.ready and host.loaded() == [] and host.current is None
        assert host.description == "no model loaded"
        with pytest.raises(ModelNotLoadedError, match="serves no model"):
            host.get()
        with pytest.raises(ModelNotLoadedError):
            host.acquire("gemma3")                                 # on_demand off: loaded ones only


def test_the_default_model_answers_to_its_name_and_file(host):
    loaded = host.load(None, EngineSettings(ctx=1024, parallel=2, n_threads=2))
    engine = loaded.engine
    assert host.get() is engine and host.get("smollm2") is engine
    assert host.get("smollm2.gguf") is engine                      # the file's name
    assert host.names() == ["smollm2"]
    assert host.description == "smollm2 · ctx 1024 · 2 slots · 2 threads"


def test_an_unknown_name_says_what_could_be_served(host):
    host.load("gemma3", EngineSettings())
    with pytest.raises(ModelNotLoadedError) as err:
        host.acquire("llama-3-70b")
    assert isinstance(err.value, ModelNotFoundError)
    assert str(err.value) == "the model 'llama-3-70b' does not exist; this server serves 'gemma3', 'qwen', 'smollm2'"
    with pytest.raises(ModelNotLoadedError) as err:
        host.acquire("x" * 10_000)
    assert len(str(err.value)) < 300                              # never echoes megabytes


def test_an_installed_model_loads_on_its_first_request_and_stays(host, world):
    host.load("smollm2", EngineSettings())
    with host.acquire("gemma3:Q4") as lease:                       # any of its names
        assert lease.name == "gemma3" and lease.engine.name == "gemma3"
        states = {m["name"]: m["state"] for m in host.listing()}
        assert states == {"smollm2": "loaded", "gemma3": "loaded", "qwen": "unloaded"}
        assert [m["active"] for m in host.listing()[:2]] == [0, 1]
    with host.acquire("gemma3") as again:
        assert again.engine is lease.engine                         # loaded once
    assert host.current.name == "smollm2"                           # the default did not change
    assert len(world.opened) == 2 and host.used() == Footprint(400 * MiB)


def test_a_load_that_needs_room_unloads_the_least_recently_used_idle_model(world):
    with world.host(budget_mib=600) as host:
        smol = host.acquire("smollm2")
        smol.release()
        gemma = host.acquire("gemma3")
        gemma.release()
        host.acquire("smollm2").release()                           # smollm2 is now the most recent
        with host.acquire("qwen") as lease:                         # 100 + 300 + 250 > 600: gemma3 goes
            assert lease.name == "qwen"
        assert gemma.engine.closed and not smol.engine.closed
        assert host.names() == ["smollm2", "qwen"] and host.evictions == 1
        assert host.used().ram <= 600 * MiB


def test_a_model_with_live_requests_is_never_unloaded_the_new_one_waits(world):
    with world.host(budget_mib=400) as host:
        busy = host.acquire("gemma3")                               # 300 of 400, held by a request
        got = {}

        def wants_qwen():
            got["lease"] = host.acquire("qwen", timeout=10)

        waiter = threading.Thread(target=wants_qwen)
        waiter.start()
        time.sleep(0.2)
        assert waiter.is_alive() and not busy.engine.closed and "lease" not in got
        busy.release()                                              # idle now: qwen may take its room
        waiter.join(5)
        assert got["lease"].name == "qwen" and busy.engine.closed
        got["lease"].release()


def test_an_engine_running_requests_without_a_lease_is_not_unloaded_either(world):
    with world.host(budget_mib=400) as host:
        host.load("gemma3")
        host.get("gemma3").busy = 1                                 # the TUI chats with it
        with pytest.raises(HostBusyError, match="could not be loaded in time"):
            host.acquire("qwen", timeout=0.3)
        assert not host.get("gemma3").closed


def test_concurrent_first_requests_load_a_model_once(world):
    world.load_delay = 0.3
    with world.host() as host:
        leases = []
        threads = [threading.Thread(target=lambda: leases.append(host.acquire("gemma3"))) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        assert len(leases) == 6 and len({id(lease.engine) for lease in leases}) == 1
        assert [e.name for e in world.opened] == ["gemma3"]
        assert host.listing()[0]["active"] == 6
        for lease in leases:
            lease.release()
        assert host.listing()[0]["active"] == 0


def test_a_failed_load_fails_its_waiters_once_and_keeps_the_others(world):
    world.load_delay = 0.2
    with world.host() as host:
        kept = host.load("smollm2").engine
        errors = []

        def wants():
            try:
                host.acquire("fails-to-load")
            except RuntimeError as exc:
                errors.append(exc)

        threads = [threading.Thread(target=wants) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        assert len(errors) == 4 and len({id(e) for e in errors}) == 1   # one load, one error for all
        assert host.get() is kept and not kept.closed and host.names() == ["smollm2"]
        with pytest.raises(ModelFileError, match="truncated"):         # refused by its plan, before loading
            host.acquire("broken")
        assert host.get() is kept


def test_a_model_larger_than_the_budget_is_refused_before_loading(world):
    with world.host(budget_mib=1000) as host:
        host.load("smollm2")
        with pytest.raises(ModelDoesNotFitError, match="huge needs 4.9 GiB"):
            host.acquire("huge")
        assert [e.name for e in world.opened] == ["smollm2"] and host.names() == ["smollm2"]


def test_keep_alive_zero_unloads_when_the_request_ends_and_minus_one_keeps(host):
    with host.acquire("gemma3", keep_alive=0) as lease:
        assert not lease.engine.closed
    for _ in range(100):
        if lease.engine.closed:
            break
        time.sleep(0.02)
    assert lease.engine.closed and "gemma3" not in host.names()
    kept = host.acquire("qwen", keep_alive=float("inf"))
    kept.release()
    short = host.acquire("smollm2", keep_alive=0.3)
    short.release()
    assert host.listing()[1]["expires_in"] is not None
    time.sleep(0.8)
    assert short.engine.closed and not kept.engine.closed and host.names() == ["qwen"]


def test_a_pinned_model_is_never_unloaded_for_room(world):
    with world.host(budget_mib=400) as host:
        host.load("gemma3", pin=True)
        with pytest.raises(HostBusyError):
            host.acquire("qwen", timeout=0.2)
        host.pin("gemma3", False)
        with host.acquire("qwen") as lease:
            assert lease.name == "qwen"


def test_the_waiting_line_is_bounded(world):
    with world.host(budget_mib=400, max_waiting=1) as host:
        busy = host.acquire("gemma3")
        waiter = threading.Thread(target=lambda: pytest.raises(HostBusyError, host.acquire, "qwen", timeout=1))
        waiter.start()
        time.sleep(0.1)
        with pytest.raises(HostBusyError, match="already wait"):
            host.acquire("qwen", timeout=1)
        waiter.join(5)
        busy.release()


def test_the_models_config_sets_load_time_keys_per_model(world):
    config = ModelsConfig.model_validate({"defaults": {"keep_alive": "10m"},
                                          "models": {"gemma3": {"ctx": 2048, "parallel": 2, "pin": True}}})
    with world.host(config=config, settings=EngineSettings(ctx=4096, parallel=4)) as host:
        with host.acquire("gemma3") as gemma, host.acquire("qwen") as qwen:
            assert (gemma.engine.settings.ctx, gemma.engine.settings.parallel) == (2048, 2)
            assert (qwen.engine.settings.ctx, qwen.engine.settings.parallel) == (4096, 4)
            assert gemma.resident.pinned and gemma.resident.footprint == Footprint(150 * MiB)
            assert qwen.resident.keep_alive == 600


def test_unload_and_close_free_the_engines(host):
    engine = host.load("smollm2").engine
    assert host.unload("somebody-else") is False and not engine.closed
    assert host.unload("smollm2") is True and engine.closed and not host.ready
    with host.acquire() as lease:                                   # the default model loads again
        assert lease.name == "smollm2" and lease.engine is not engine
    again = host.load("gemma3").engine
    host.close()
    assert again.closed and host.loaded() == []
    with pytest.raises(HostBusyError, match="shutting down"):
        host.acquire("qwen")


def test_unloading_a_busy_model_waits_for_its_requests(host):
    lease = host.acquire("gemma3")
    assert host.unload("gemma3") is True and not lease.engine.closed
    lease.release()
    for _ in range(100):
        if lease.engine.closed:
            break
        time.sleep(0.02)
    assert lease.engine.closed


def test_adopt_serves_an_engine_built_elsewhere(host):
    engine = FakeEngine(Path("/tmp/x.gguf"), EngineSettings(ctx=512), "bench-model")
    entry = host.adopt(engine, engine.path, aliases=("bm",))
    assert entry.settings.ctx == 512                              # the engine's own settings
    assert host.get("bench-model") is engine and host.get("bm") is engine and host.get("x") is engine
