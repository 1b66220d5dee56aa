"""The prompt cache's disk tier: saved KV states that outlive the RAM cache, the model's
unload and the process (~/.cache/edge-infer/kv/, --disk-cache SIZE).

One file per saved state (engine/kv/kv_file.py holds the format): a header with the key that
makes the state valid (the model file's identity, KV types and layout, llama.cpp's
version) and checksums, the tokens, then llama.cpp's bytes. A file is checked in full before
llama_state_seq_set_data sees it; anything wrong with it (corrupt, truncated, another
version, a replaced model) is deleted, never loaded.

Writes happen on a writer thread (the engine thread only hands bytes over), to a temporary
file then renamed, so a reader never sees half a file; the cap (least recently used out)
is applied under a file lock, so processes sharing the folder agree. A full disk or an
unwritable folder turns the tier off with one warning: serving goes on from RAM.
"""

from __future__ import annotations

import errno
import logging
import os
import queue
import threading
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from edge_infer.engine.kv.kv_file import SUFFIX, BadStateFile, StateKey, read_header, read_state, write_state
from edge_infer.engine.kv.ram_tier import usable_prefix

log = logging.getLogger("edge_infer.disk_cache")
TEMP_PREFIX = ".tmp-"
QUEUED_BYTES_MAX = 512 * 1024 * 1024  # states waiting to be written; more are dropped (RAM bound)


@dataclass
class DiskCounters:
    entries: int = 0          # files this engine's key can use
    bytes: int = 0            # bytes of the whole folder (every model's)
    cap_bytes: int = 0
    hits: int = 0
    misses: int = 0
    writes: int = 0
    evictions: int = 0
    rejected: int = 0         # files found corrupt, stale or foreign and deleted
    dropped: int = 0          # states not written: the writer was behind, or the tier is off
    restored_bytes: int = 0
    restore_seconds: float = 0.0  # reading, checking and restoring them (engine/kv/pool.py)
    off_reason: str = ""      # why the tier is off ("" while it works)


@dataclass(frozen=True)
class _Entry:
    path: Path
    tokens: tuple[int, ...]
    nbytes: int


class DiskCache:
    def __init__(self, folder: Path, cap_bytes: int, key: StateKey):
        self.folder, self.key = Path(folder), key
        self.counters = DiskCounters(cap_bytes=cap_bytes)
        self._index: dict[tuple[int, ...], _Entry] = {}
        self._seen: dict[str, int] = {}   # file name -> mtime_ns when its header was read
        self._folder_mtime: int | None = None  # the folder's when it was last scanned
        self._lock = threading.Lock()     # the index: engine thread and writer thread
        self._queue: queue.Queue = queue.Queue()
        self._queued_bytes = 0
        self._writer: threading.Thread | None = None
        if cap_bytes <= 0:
            self.counters.off_reason = "off (--disk-cache 0)"
            return
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._file_lock = FileLock(str(self.folder / ".lock"), timeout=10)
            self.scan()
        except OSError as exc:
            self._turn_off(f"cannot use {self.folder}: {exc.strerror or exc}")
            return
        self._writer = threading.Thread(target=self._write_loop, name="edge-infer-kv-writer", daemon=True)
        self._writer.start()

    @property
    def enabled(self) -> bool:
        return not self.counters.off_reason

    # ---- lookups (engine thread) -------------------------------------------------------
    def peek(self, tokens) -> int:
        """How many of the first `tokens` a saved state on disk holds (0: none)."""
        if not self.enabled:
            return 0
        found = self._longest(tuple(tokens))
        return usable_prefix(found.tokens, tuple(tokens)) if found else 0

    def load(self, tokens) -> tuple[tuple[int, ...], bytes] | None:
        """(saved tokens, state bytes) of the state that holds most of `tokens`' first ones
        (the RAM tier's rule: it may go on past them, and the slot drops its tail), checked in
        full; None (a miss) when there is none or its file is bad (then it is deleted)."""
        found = self._longest(tuple(tokens)) if self.enabled else None
        if found is None:
            self.counters.misses += 1
            return None
        try:
            saved_tokens, data = read_state(found.path, self.key)
            if saved_tokens != found.tokens:
                raise BadStateFile("its tokens changed since it was indexed")
        except BadStateFile as exc:
            self._reject(found, str(exc))
            self.counters.misses += 1
            return None
        except OSError:  # deleted by another process meanwhile
            self._forget(found)
            self.counters.misses += 1
            return None
        try:
            os.utime(found.path)  # recently used: the cap removes it last
        except OSError:
            pass
        self.counters.hits += 1
        self.counters.restored_bytes += len(data)
        return saved_tokens, data

    def holds(self, tokens) -> bool:
        with self._lock:
            return tuple(tokens) in self._index

    def _longest(self, prompt: tuple[int, ...]) -> _Entry | None:
        self._refresh()
        with self._lock:
            best, best_n = None, 0
            for entry in self._index.values():
                n = usable_prefix(entry.tokens, prompt)
                if n > best_n or (n == best_n and n and len(entry.tokens) < len(best.tokens)):
                    best, best_n = entry, n  # the shorter of equals: less to read
            return best

    # ---- the folder ------------------------------------------------------------------
    def scan(self) -> None:
        """Index the files this key can use; delete bad and stale ones (a replaced model)."""
        names, total = set(), 0
        for path in self.folder.glob("*" + SUFFIX):
            names.add(path.name)
            try:
                st = path.stat()
            except OSError:
                continue
            mtime, total = st.st_mtime_ns, total + st.st_size
            if self._seen.get(path.name) == mtime:
                continue
            self._seen[path.name] = mtime
            try:
                header, tokens = read_header(path)
            except BadStateFile as exc:
                self._delete(path, f"unreadable ({exc})")
                continue
            except OSError:
                continue
            if header.key == self.key:
                with self._lock:
                    self._index[tokens] = _Entry(path, tokens, path.stat().st_size)
            elif header.key.stale_for(self.key):
                self._delete(path, "its model file was replaced")
        with self._lock:  # files other processes removed
            for tokens in [t for t, e in self._index.items() if e.path.name not in names]:
                del self._index[tokens]
            self.counters.entries = len(self._index)
        self.counters.bytes = total
        for name in [n for n in self._seen if n not in names]:
            del self._seen[name]
        self._clean_temporaries()

    def _refresh(self) -> None:
        """Rescan when the folder changed (another process wrote or removed a file)."""
        try:
            mtime = self.folder.stat().st_mtime_ns
        except OSError:
            return
        if mtime != self._folder_mtime:
            self._folder_mtime = mtime
            self.scan()

    def _clean_temporaries(self) -> None:
        import time

        for path in self.folder.glob(TEMP_PREFIX + "*"):
            try:  # a writer that died mid-file; an hour is far longer than any write
                if time.time() - path.stat().st_mtime > 3600:
                    path.unlink()
            except OSError:
                pass

    def _reject(self, entry: _Entry, why: str) -> None:
        self._forget(entry)
        self._delete(entry.path, why)

    def _forget(self, entry: _Entry) -> None:
        with self._lock:
            if self._index.get(entry.tokens) is entry:
                del self._index[entry.tokens]
            self.counters.entries = len(self._index)

    def _delete(self, path: Path, why: str) -> None:
        log.warning("deleting saved KV state %s: %s", path.name, why)
        self.counters.rejected += 1
        try:
            path.unlink()
        except OSError:
            pass

    # ---- writes ----------------------------------------------------------------------
    def put(self, tokens, data: bytes | bytearray, wait: bool = False) -> None:
        """Queue a state to be written (the writer thread writes it); dropped when the tier
        is off, the state is larger than the cap, or too many bytes wait already (unless
        `wait`: then it waits for the writer first)."""
        if wait and self._queued_bytes + len(data) > QUEUED_BYTES_MAX:
            self.flush()
        if not self.enabled or len(data) > self.counters.cap_bytes \
                or self._queued_bytes + len(data) > QUEUED_BYTES_MAX:
            self.counters.dropped += 1
            return
        with self._lock:
            self._queued_bytes += len(data)
        self._queue.put((tuple(tokens), data))

    def flush(self, timeout: float = 120) -> None:
        """Wait until every queued state is written (or dropped)."""
        if self._writer is not None:
            done = threading.Event()
            self._queue.put(done)
            done.wait(timeout)

    def close(self) -> None:
        self.flush()
        if self._writer is not None:
            self._queue.put(None)
            self._writer.join(timeout=10)
            self._writer = None

    def _write_loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            if isinstance(item, threading.Event):
                item.set()
                continue
            tokens, data = item
            try:
                if self.enabled:
                    self._write(tokens, data)
                else:
                    self.counters.dropped += 1
            except Exception:  # never let the writer die: the tier goes off instead
                log.exception("writing a saved KV state failed")
                self._turn_off("an unexpected error while writing (see the log)")
            finally:
                with self._lock:
                    self._queued_bytes -= len(data)

    def _write(self, tokens: tuple[int, ...], data: bytes | bytearray) -> None:
        try:
            with self._file_lock:
                path = write_state(self.folder, self.key, tokens, data, TEMP_PREFIX)
                self._make_room(keep=path)
        except Timeout:
            self.counters.dropped += 1  # another process holds the folder: skip this one
            return
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM):
                self._turn_off(f"cannot write to {self.folder}: {exc.strerror}")
                return
            raise
        with self._lock:
            # A saved longer history makes its own shorter saves redundant: they go.
            shorter = [e for t, e in self._index.items() if len(t) < len(tokens) and tokens[:len(t)] == t]
            self._index[tokens] = _Entry(path, tokens, len(data))
            self.counters.entries = len(self._index)
        for entry in shorter:
            self._forget(entry)
            try:
                entry.path.unlink()
            except OSError:
                pass
        self.counters.writes += 1

    def _make_room(self, keep: Path) -> None:
        """Delete the least recently used files (any model's) until the folder fits the cap."""
        files = []
        for path in self.folder.glob("*" + SUFFIX):
            try:
                st = path.stat()
            except OSError:
                continue
            files.append((st.st_mtime_ns, st.st_size, path))
        total = sum(size for _, size, _ in files)
        for _, size, path in sorted(files):
            if total <= self.counters.cap_bytes:
                break
            if path == keep:
                continue
            try:
                path.unlink()
            except OSError:
                continue
            total -= size
            self.counters.evictions += 1
            with self._lock:
                for t in [t for t, e in self._index.items() if e.path == path]:
                    del self._index[t]
        self.counters.bytes = total

    def _turn_off(self, why: str) -> None:
        if not self.counters.off_reason:
            log.warning("the disk prompt cache is off: %s; serving goes on without it", why)
        self.counters.off_reason = why
