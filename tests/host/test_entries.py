"""ModelEntry: one entry per model a request may name, local and remote alike, built by the
host (host/entries.py): residents (loaded, loading, failed), installed models, failures,
remote models; and the dict shape host.listing() keeps."""

from __future__ import annotations

import math
import time
from pathlib import Path

from edge_infer.config import EngineSettings
from edge_infer.host import FOREVER, Footprint, ModelEntry, ModelHost, Resident
from edge_infer.host.entries import installed_entry, local_entries, remote_entries, resident_entry
from edge_infer.host.sources import Source
from edge_infer.remote import RemoteModel, RemoteModels
from tests.doubles import EngineDouble
from tests.host.test_model_host import MiB, World

LEGACY_RESIDENT_KEYS = ["name", "state", "path", "ram_bytes", "vram_bytes", "active", "pinned", "idle_seconds",
                        "keep_alive", "expires_in", "loaded_at", "load_seconds", "default"]


class FailedEngine(EngineDouble):
    state = "failed"
    failure = "worker 127.0.0.1:50052 is gone"


def resident(name: str, engine=None, **kw) -> Resident:
    return Resident(name, Path(f"/m/{name}.gguf"), EngineSettings(), Footprint(100 * MiB, 20 * MiB),
                    engine=engine, **kw)


def test_a_loaded_model_is_listed_with_its_memory_requests_and_keep_alive():
    m = resident("a", EngineDouble(), keep_alive=300.0, loaded_at=1234.5, load_seconds=0.12345)
    m.expires_at = time.monotonic() + 300
    e = resident_entry(m, default="a")
    assert (e.name, e.kind, e.state, e.path) == ("a", "local", "loaded", Path("/m/a.gguf"))
    assert e.memory == Footprint(100 * MiB, 20 * MiB) and e.size_bytes is None
    assert e.default and not e.pinned and not e.is_remote and e.failure is None
    assert 299 <= e.expires_in <= 300 and e.keep_alive == 300.0
    assert e.loaded_at == 1234.5 and e.load_seconds == 0.123


def test_a_busy_model_has_no_expiry_and_no_idle_time():
    m = resident("a", EngineDouble(), active=2)
    m.expires_at = time.monotonic() + 5
    e = resident_entry(m, default=None)
    assert e.active == 2 and e.expires_in is None and e.idle_seconds == 0.0 and not e.default
    assert resident_entry(resident("b", EngineDouble()), None).expires_in is None  # until memory is needed


def test_a_loading_model_has_its_planned_memory():
    e = resident_entry(resident("a"), default=None)
    assert e.state == "loading" and e.memory == Footprint(100 * MiB, 20 * MiB) and e.failure is None


def test_a_model_whose_engine_failed_is_unavailable_saying_why():
    e = resident_entry(resident("a", FailedEngine()), default=None)
    assert e.state == "unavailable" and e.failure == "worker 127.0.0.1:50052 is gone"
    assert e.memory is not None  # still resident until the host takes it out
    assert "error" not in e.as_dict()


def test_an_installed_model_is_unloaded_or_unavailable_after_a_failure():
    s = Source(Path("/m/b.gguf"), "b", size=42)
    e = installed_entry(s, {})
    assert (e.state, e.size_bytes, e.memory, e.failure) == ("unloaded", 42, None, None)
    e = installed_entry(s, {"b": "its engine stopped"})
    assert (e.state, e.failure) == ("unavailable", "its engine stopped")
    assert e.as_dict() == {"name": "b", "state": "unavailable", "path": "/m/b.gguf", "size_bytes": 42,
                           "error": "its engine stopped"}


def test_local_entries_list_residents_first_and_each_file_once():
    loaded = resident("a", EngineDouble())
    installed = [Source(Path("/m/c.gguf"), "c"), Source(Path("/m/a.gguf"), "a-family"), Source(Path("/m/c.gguf"), "c")]
    entries = local_entries([loaded, resident("b")], "a", installed, {})
    assert [(e.name, e.state) for e in entries] == [("a", "loaded"), ("b", "loading"), ("c", "unloaded")]


def test_a_remote_model_is_listed_with_its_upstreams():
    big = RemoteModel("big", ["http://a:8000", "http://b:8000/v1"], remote_model="Qwen/Qwen2.5-72B")
    u = big.upstreams[1]
    since = big.started(u)
    big.started(big.upstreams[0])
    big.finished(u, since, error="connect refused")
    (e,) = remote_entries(RemoteModels([big]))
    assert (e.name, e.kind, e.state, e.is_remote) == ("big", "remote", "remote", True)
    assert e.remote_model == "Qwen/Qwen2.5-72B" and e.active == 1 and e.healthy == 1
    assert [(x["url"], x["up"], x["errors"]) for x in e.upstreams] == [
        ("http://a:8000/v1", True, 0), ("http://b:8000/v1", False, 1)]
    assert e.path is None and e.memory is None
    assert e.as_dict() == big.listing()


def test_the_dict_shape_stays_and_reads_back():
    m = resident("a", EngineDouble(), pinned=True)
    e = resident_entry(m, default="a")
    d = e.as_dict()
    assert list(d) == LEGACY_RESIDENT_KEYS and d["path"] == "/m/a.gguf" and d["ram_bytes"] == 100 * MiB
    assert d["keep_alive"] == math.inf and d["pinned"] and d["default"]
    assert ModelEntry.from_dict(d) == e
    for entry in (installed_entry(Source(Path("/m/b.gguf"), "b", size=7), {"b": "gone"}),
                  remote_entries(RemoteModels([RemoteModel("r", ["http://x/v1"])]))[0]):
        assert ModelEntry.from_dict(entry.as_dict()) == entry
    partial = ModelEntry.from_dict({"name": "big", "state": "unavailable", "path": "/m/big.gguf", "error": "x"})
    assert (partial.active, partial.memory, partial.failure, partial.keep_alive) == (0, None, "x", FOREVER)


def test_the_host_lists_local_then_remote_models():
    world = World()
    with world.host() as host:
        host.load("gemma3", EngineSettings())
        host.remotes = RemoteModels([RemoteModel("big", ["http://a/v1"])])
        entries = host.entries()
        assert [(e.name, e.kind, e.state) for e in entries] == [
            ("gemma3", "local", "loaded"), ("qwen", "local", "unloaded"), ("smollm2", "local", "unloaded"),
            ("big", "remote", "remote")]
        assert host.listing() == [e.as_dict() for e in entries[:3]]  # the local ones as dicts


def host_reading(world: World, list_sources) -> ModelHost:
    return ModelHost(locate=world.locate, open_engine=world.open_engine, find_source=world.find_source,
                     list_sources=list_sources, footprint=world.footprint)


def test_without_installed_models_the_store_is_not_read():
    def store():
        raise AssertionError("the store was read")

    with host_reading(World(), store) as host:
        host.load("gemma3", EngineSettings())
        assert [e.name for e in host.entries(installed=False)] == ["gemma3"]


def test_an_unreadable_store_still_lists_the_loaded_models():
    def store():
        raise OSError("manifest unreadable")

    with host_reading(World(), store) as host:
        host.load("gemma3", EngineSettings())
        assert [e.name for e in host.entries()] == ["gemma3"]
        assert host.servable_names() == ["gemma3"]


def test_a_failure_marks_the_installed_model_until_it_loads_again():
    world = World()
    with world.host() as host:
        host.failures["qwen"] = "its engine stopped"
        states = {e.name: (e.state, e.failure) for e in host.entries()}
        assert states["qwen"] == ("unavailable", "its engine stopped")
        assert states["gemma3"] == ("unloaded", None)
        with host.acquire("qwen"):
            pass
        assert {e.name: e.state for e in host.entries()}["qwen"] == "loaded"
