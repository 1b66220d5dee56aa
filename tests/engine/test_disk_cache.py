"""The prompt cache's disk tier without a model: the file format's checks, the cap, the
index across instances (a restart) and processes, and a full or unwritable disk."""

from __future__ import annotations

import errno
import logging
import multiprocessing
import os

import pytest

from edge_infer.engine.kv import disk_tier as dc
from edge_infer.engine.kv.disk_tier import DiskCache
from edge_infer.engine.kv.kv_file import SUFFIX, StateKey, read_header
from edge_infer.plan.cache_sizes import RAM_CEILING, RAM_FLOOR, disk_cache_bytes, prompt_cache_bytes
from edge_infer.units import GiB, MiB

KEY = StateKey(model="/models/smol.gguf", model_id="sha256=1", layout="k=f16 v=f16")


def state(n_tokens: int, nbytes: int, seed: int = 0) -> tuple[tuple[int, ...], bytearray]:
    return tuple(range(seed, seed + n_tokens)), bytearray(os.urandom(nbytes))


def written(folder, cap=64 * MiB, key=KEY, *states) -> DiskCache:
    cache = DiskCache(folder, cap, key)
    for tokens, data in states:
        cache.put(tokens, data)
    cache.flush()
    return cache


def files(folder) -> list:
    return sorted(folder.glob("*" + SUFFIX))


def test_a_saved_state_is_found_again_after_a_restart_by_its_longest_prefix(tmp_path):
    tokens, data = state(100, 4096)
    written(tmp_path, 64 * MiB, KEY, (tokens, data)).close()
    again = DiskCache(tmp_path, 64 * MiB, KEY)  # a new process: only the folder is shared
    assert again.peek(tokens + (7, 8)) == 100 and again.peek((9,) + tokens) == 0
    # The RAM tier's rule: a state that goes on past the prompt gives what they share (the
    # slot drops its tail), where its tail is at most max(PARTIAL_TAIL, shared).
    assert again.peek(tokens[:50]) == 50 and again.peek(tokens[:50] + (7,)) == 50
    saved, got = again.load(tokens + (7, 8))
    assert saved == tokens and got == data and again.counters.hits == 1
    again.close()


def test_a_longer_save_of_the_same_conversation_replaces_its_shorter_one(tmp_path):
    short, _ = state(100, 1024)
    cache = written(tmp_path, 64 * MiB, KEY, (short, bytearray(1024)), (short + (1, 2, 3), bytearray(2048)))
    assert len(files(tmp_path)) == 1 and cache.peek(short + (1, 2, 3, 4)) == 103
    cache.close()


@pytest.mark.parametrize("damage", ["flip a state byte", "truncate", "not a state file", "flip a token"])
def test_a_damaged_file_is_deleted_and_never_loaded(tmp_path, damage, caplog):
    tokens, data = state(80, 8192)
    written(tmp_path, 64 * MiB, KEY, (tokens, data)).close()
    (path,) = files(tmp_path)
    raw = bytearray(path.read_bytes())
    if damage == "flip a state byte":
        raw[-100] ^= 0xFF
    elif damage == "truncate":
        raw = raw[:-500]
    elif damage == "not a state file":
        raw = bytearray(b"PK\x03\x04 something else entirely")
    else:
        raw[len(raw) - len(data) - 8] ^= 0x01
    path.write_bytes(raw)
    with caplog.at_level(logging.WARNING, "edge_infer.disk_cache"):
        cache = DiskCache(tmp_path, 64 * MiB, KEY)
        assert cache.load(tokens) is None
    assert not path.exists() and cache.counters.rejected == 1
    assert "deleting saved KV state" in caplog.text
    cache.close()


def test_a_state_of_a_replaced_model_file_is_deleted_and_another_layouts_is_kept(tmp_path):
    tokens, data = state(80, 1024)
    written(tmp_path, 64 * MiB, KEY, (tokens, data)).close()
    q8 = StateKey(KEY.model, KEY.model_id, "k=q8_0 v=q8_0")
    written(tmp_path, 64 * MiB, q8, (tokens, data)).close()
    other_model = StateKey("/models/other.gguf", "sha256=9", KEY.layout)
    written(tmp_path, 64 * MiB, other_model, (tokens, data)).close()
    assert len(files(tmp_path)) == 3
    replaced = StateKey(KEY.model, "sha256=2", KEY.layout)  # the same file now holds other weights
    cache = DiskCache(tmp_path, 64 * MiB, replaced)
    assert cache.peek(tokens) == 0
    left = {read_header(p)[0].key for p in files(tmp_path)}
    assert left == {other_model}  # both of the old file's states went; another model's stays
    cache.close()


def test_an_identity_of_another_kind_is_not_judged_stale(tmp_path):
    """A benchmark's engine knows a store model by size and mtime, the host by its sha256:
    neither may delete the other's states of the same file."""
    tokens, data = state(80, 1024)
    written(tmp_path, 64 * MiB, KEY, (tokens, data)).close()
    by_stat = StateKey(KEY.model, "size=100 mtime_ns=5", KEY.layout)
    cache = DiskCache(tmp_path, 64 * MiB, by_stat)
    assert cache.peek(tokens) == 0 and len(files(tmp_path)) == 1
    cache.close()


def test_the_cap_removes_the_least_recently_used_files_first(tmp_path):
    cache = DiskCache(tmp_path, int(3.5 * MiB), KEY)
    convs = [state(64, MiB, seed=1000 * i) for i in range(3)]
    for tokens, data in convs:
        cache.put(tokens, data)
        cache.flush()
    os.utime(files(tmp_path)[0], (1, 1))  # make the order certain (mtime granularity)
    for p in files(tmp_path):
        if read_header(p)[1] != convs[0][0]:
            os.utime(p, (2, 2))
    assert cache.load(convs[0][0]) is not None  # used now: the newest
    cache.put(*state(64, MiB, seed=9000))
    cache.flush()
    assert cache.peek(convs[0][0]) == 64 and cache.counters.evictions == 1
    assert sum(p.stat().st_size for p in files(tmp_path)) <= 3.5 * MiB
    assert sum(cache.peek(t) > 0 for t, _ in convs) == 2
    cache.put(*state(64, 4 * MiB))  # larger than the whole cap: not written
    cache.flush()
    assert cache.counters.dropped == 1
    cache.close()


def test_a_full_disk_turns_the_tier_off_with_one_warning_and_nothing_raises(tmp_path, monkeypatch, caplog):
    def no_space(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    cache = DiskCache(tmp_path, 64 * MiB, KEY)
    monkeypatch.setattr(dc, "write_state", no_space)
    with caplog.at_level(logging.WARNING, "edge_infer.disk_cache"):
        for i in range(3):
            cache.put(*state(64, 1024, seed=i * 100))
        cache.flush()
    assert not cache.enabled and "No space left on device" in cache.counters.off_reason
    assert caplog.text.count("the disk prompt cache is off") == 1
    assert cache.peek(state(64, 1)[0]) == 0 and cache.load(state(64, 1)[0]) is None
    cache.close()


def test_an_unusable_folder_turns_the_tier_off(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    cache = DiskCache(blocker / "kv", 64 * MiB, KEY)
    assert not cache.enabled and str(blocker / "kv") in cache.counters.off_reason
    cache.put(*state(64, 1024))
    cache.close()
    assert DiskCache(tmp_path / "off", 0, KEY).counters.off_reason.startswith("off")


def _writer_process(folder: str, seed: int) -> None:
    cache = DiskCache(folder, 6 * MiB, KEY)
    for i in range(12):
        cache.put(*state(64, 512 * 1024, seed=seed * 10_000 + i * 100))
    cache.close()


def test_two_processes_sharing_the_folder_leave_only_whole_files_within_the_cap(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer_process, args=(str(tmp_path), seed)) for seed in (1, 2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    left = files(tmp_path)
    assert left and sum(p.stat().st_size for p in left) <= 6 * MiB
    cache = DiskCache(tmp_path, 6 * MiB, KEY)
    assert cache.counters.rejected == 0 and cache.counters.entries == len(left)
    for p in left:
        assert cache.load(read_header(p)[1]) is not None
    assert not list(tmp_path.glob(dc.TEMP_PREFIX + "*"))
    cache.close()


def test_cache_sizes_follow_the_machine(monkeypatch):
    from edge_infer.plan import cache_sizes

    monkeypatch.setattr(cache_sizes, "DISK_DEFAULT", 4 * GiB)  # the suite's conftest turns it off
    assert prompt_cache_bytes(512) == 512 * MiB and prompt_cache_bytes(0) == 0
    assert prompt_cache_bytes(-1, ram_available=20 * GiB) == 2 * GiB
    assert prompt_cache_bytes(-1, ram_available=200 * GiB) == RAM_CEILING
    assert prompt_cache_bytes(-1, ram_available=2 * GiB) == RAM_FLOOR  # a small laptop keeps a few
    assert prompt_cache_bytes(-1, ram_available=512 * MiB) == 128 * MiB  # and never a large share
    assert disk_cache_bytes("", None, disk_free=100 * GiB) == 4 * GiB
    assert disk_cache_bytes("", None, disk_free=10 * GiB) == GiB  # a nearly full disk: a tenth of it
    assert disk_cache_bytes("0", None) == 0 and disk_cache_bytes("512MiB", None) == 512 * MiB
