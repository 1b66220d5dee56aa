"""Progress output for long CLI operations: a redrawn bar on a terminal, plain lines
otherwise (logs, pipes, CI), so a captured log still says how far it got."""

from __future__ import annotations

import sys
import time
from collections import deque

from edge_infer.units import human_bytes


def _duration(seconds: float) -> str:
    seconds = int(max(0, seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


class ByteProgress:
    """Call with (bytes present, total). Speed is over the last few seconds of this run
    (bytes that were already there from an earlier run do not count as speed)."""

    def __init__(self, label: str, total: int, have: int = 0, stream=None, tty: bool | None = None,
                 plain_every: float = 5.0, clock=time.monotonic):
        self.label, self.total = label, max(1, total)
        self.stream = stream or sys.stdout
        self.tty = self.stream.isatty() if tty is None else tty
        self.clock = clock
        self.samples: deque[tuple[float, int]] = deque([(clock(), have)])
        self.start_have = have
        self.last_draw = clock()
        self.last_pct = int(100 * have / self.total) // 10 * 10  # plain mode: a line per 10%
        self.plain_every = plain_every
        self.done = False

    def speed(self) -> float:
        (t0, b0), (t1, b1) = self.samples[0], self.samples[-1]
        return (b1 - b0) / (t1 - t0) if t1 > t0 else 0.0

    def line(self, have: int) -> str:
        pct = 100 * have / self.total
        speed = self.speed()
        eta = (self.total - have) / speed if speed > 0 else None
        text = f"{human_bytes(have)} / {human_bytes(self.total)}  {human_bytes(speed)}/s  ETA {_duration(eta) if eta is not None else '?'}"
        if self.tty:
            width = 24
            fill = int(width * have / self.total)
            return f"{self.label}  {pct:5.1f}% [{'#' * fill}{'.' * (width - fill)}] {text}"
        return f"{self.label}: {pct:.0f}%  {text}"

    def __call__(self, have: int, total: int | None = None) -> None:
        now = self.clock()
        self.samples.append((now, have))
        while len(self.samples) > 2 and now - self.samples[0][0] > 5.0:
            self.samples.popleft()
        finished = have >= self.total
        if self.tty:
            if finished or now - self.last_draw >= 0.1:
                self.stream.write("\r" + self.line(have) + "\x1b[K")
                self.stream.flush()
                self.last_draw = now
        else:
            pct = int(100 * have / self.total) // 10 * 10
            if finished or (pct > self.last_pct and now - self.last_draw >= 1.0) or now - self.last_draw >= self.plain_every:
                self.stream.write(self.line(have) + "\n")
                self.stream.flush()
                self.last_draw, self.last_pct = now, pct
        if finished:
            self.close()

    def close(self) -> None:
        if self.done:
            return
        self.done = True
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


class CountProgress:
    """Steps of a known count (tensors quantized): same two modes as ByteProgress."""

    def __init__(self, label: str, stream=None, tty: bool | None = None, clock=time.monotonic):
        self.label = label
        self.stream = stream or sys.stdout
        self.tty = self.stream.isatty() if tty is None else tty
        self.clock = clock
        self.t0 = clock()
        self.last_draw = 0.0
        self.last_pct = 0      # plain mode: a line at 25%, 50%, 75% and 100%
        self.done = False

    def __call__(self, i: int, n: int, what: str = "") -> None:
        now = self.clock()
        pct = 100 * i / max(1, n)
        eta = (now - self.t0) / i * (n - i) if i else None
        text = f"{self.label}  {i}/{n} {pct:5.1f}%  ETA {_duration(eta) if eta is not None else '?'}"
        finished = i >= n
        if self.tty:
            if finished or now - self.last_draw >= 0.1:
                self.stream.write("\r" + text + (f"  {what}" if what else "") + "\x1b[K")
                self.stream.flush()
                self.last_draw = now
        elif finished or int(pct) // 25 > self.last_pct:
            self.stream.write(text + "\n")
            self.stream.flush()
            self.last_pct = int(pct) // 25
        if finished:
            self.close()

    def close(self) -> None:
        if not self.done:
            self.done = True
            if self.tty:
                self.stream.write("\n")
                self.stream.flush()
