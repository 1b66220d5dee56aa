"""The hand-over between callers' threads and the engine thread: the sequences submitted and
not finished (bounded: a full queue refuses at once), and the queue that wakes the engine."""

from __future__ import annotations

import queue
import threading

from edge_infer.engine.sequence import Sequence
from edge_infer.errors import QueueFullError


class Inbox:
    def __init__(self, limit: int):
        self.limit = limit  # running + queued
        self._queue: queue.SimpleQueue = queue.SimpleQueue()  # new sequences, or None to wake
        self._lock = threading.Lock()
        self._live: dict[str, Sequence] = {}

    def put(self, seq: Sequence) -> None:
        """Hand a new sequence to the engine thread; QueueFullError when `limit` are in flight
        (the refused sequence's sampler is freed: nobody else holds it)."""
        with self._lock:
            if len(self._live) >= self.limit:
                if seq.sampler is not None:
                    seq.sampler.close()
                raise QueueFullError(f"{len(self._live)} requests in flight; the queue is full, retry later")
            self._live[seq.id] = seq
        self._queue.put(seq)

    def wake(self) -> None:
        self._queue.put(None)

    def cancel(self, request_id: str) -> None:
        with self._lock:
            seq = self._live.get(request_id)
        if seq is not None:
            seq.cancelled = True
            self.wake()  # the engine may be asleep

    def live(self) -> list[Sequence]:
        with self._lock:
            return list(self._live.values())

    def done(self, seq: Sequence) -> None:
        with self._lock:
            self._live.pop(seq.id, None)

    def take(self, block: bool) -> list[Sequence]:
        """Every sequence handed over since the last call; waits for one (or a wake) if `block`."""
        try:
            item = self._queue.get() if block else self._queue.get_nowait()
        except queue.Empty:
            return []
        taken = []
        while True:
            if item is not None:
                taken.append(item)
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return taken
