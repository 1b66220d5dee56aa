"""Every request ends, even when a llama.cpp call never returns.

A C call cannot be interrupted from Python. So a second thread watches the engine thread's
step clock: when one step (llama_decode + sampling) has run longer than `stall_timeout`,
the engine is declared stalled. Every live request is ended at once with a 503-style
"timeout" (their clients stop waiting), new requests are refused, and /health says
"stalled". If the call does return, the engine thread drops what was ended and serves
again (Engine._recover).
"""

from __future__ import annotations

import logging
import threading
import time

from edge_infer.engine.stream import FinishEvent

log = logging.getLogger("edge_infer.engine")


class StepClock:
    """When the engine thread entered its current step (None between steps). Set and read
    without a lock: one float assignment is atomic, and a stale read only delays a check."""

    def __init__(self):
        self.started: float | None = None

    def __enter__(self):
        self.started = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.started = None

    def running_for(self, now: float) -> float:
        started = self.started
        return 0.0 if started is None else now - started


class Watchdog:
    def __init__(self, engine, timeout: float):
        self.engine = engine
        self.timeout = timeout
        self.stalled = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="edge-infer-watchdog", daemon=True)

    def start(self) -> "Watchdog":
        if self.timeout > 0:
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        every = min(1.0, self.timeout / 4)
        while not self._stop.wait(every):
            stuck = self.engine.clock.running_for(time.perf_counter())
            if stuck > self.timeout and not self.stalled.is_set():
                self._declare(stuck)

    def _declare(self, stuck: float) -> None:
        log.error("engine step has run for %.0f s (limit %s s): ending every request", stuck, self.timeout)
        self.stalled.set()
        error = (f"the engine made no progress for {stuck:.0f} s (a llama.cpp call did not return); "
                 "the request was ended")
        for seq in self.engine.live_sequences():
            seq.abandoned = True
            # The stream's reader stops at its first FinishEvent; anything the engine thread
            # sends later (if the call returns) is never read.
            seq.stream.put(FinishEvent("timeout", "", seq.stats, error))
