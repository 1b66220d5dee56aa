"""keep_alive's clock: one thread, started when a model first gets a finite keep_alive,
unloads idle models whose time ran out (engines closed outside the host's lock)."""

from __future__ import annotations

import math
import time


def reap(host) -> None:
    while True:
        with host._cond:
            if host._closed:
                return
            now = time.monotonic()
            due = [m for m in host._models if m.engine is not None and not m.pinned
                   and m.expires_at <= now and m.idle()]
            host._models = [m for m in host._models if m not in due]
            if not due:
                soonest = min((m.expires_at for m in host._models if m.expires_at != math.inf),
                              default=math.inf)
                # Wake at the next expiry, and at least every second: an engine the TUI
                # used without a lease goes idle without telling us.
                host._cond.wait(min(1.0, max(0.01, soonest - now)))
                continue
            host._cond.notify_all()
        for m in due:
            m.engine.close()
