"""keep_alive's clock: one thread, started when a model first gets a finite keep_alive,
unloads idle models whose time ran out (engines closed outside the host's lock)."""

from __future__ import annotations

import threading
import time
from typing import Callable

from edge_infer.host.resident import Resident


def reap(cond: threading.Condition, closed: Callable[[], bool],
         take_due: Callable[[float], tuple[list[Resident], float]]) -> None:
    """take_due(now), called under cond: the residents whose time ran out, taken out of the
    host, and when the next one is due."""
    while True:
        with cond:
            if closed():
                return
            now = time.monotonic()
            due, soonest = take_due(now)
            if not due:
                # Wake at the next expiry, and at least every second: an engine the TUI
                # used without a lease goes idle without telling us.
                cond.wait(min(1.0, max(0.01, soonest - now)))
                continue
            cond.notify_all()
        for m in due:
            m.engine.close()
