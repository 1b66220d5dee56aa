"""Progress output for long CLI operations: a tqdm bar on a terminal, plain lines
otherwise (logs, pipes, CI), so a captured log still says how far it got (a redrawn
bar's carriage returns are unreadable there)."""

from __future__ import annotations

import sys
import time

from tqdm import tqdm

from edge_infer.units import RateMeter, human_bytes, human_duration, human_rate


class ByteProgress:
    """Call with (bytes present, total). Speed is over the last few seconds of this run
    (bytes that were already there from an earlier run do not count as speed)."""

    def __init__(self, label: str, total: int, have: int = 0, stream=None, tty: bool | None = None,
                 plain_every: float = 5.0, clock=time.monotonic):
        self.label, self.total = label, max(1, total)
        self.stream = stream or sys.stdout
        self.tty = self.stream.isatty() if tty is None else tty
        self.clock = clock
        self.meter = RateMeter(window=5.0)
        self.meter.add(clock(), have)
        self.last_draw = clock()
        self.last_pct = int(100 * have / self.total) // 10 * 10  # plain mode: a line per 10%
        self.plain_every = plain_every
        self.done = False
        self.bar = tqdm(total=self.total, initial=have, desc=label, unit="B", unit_scale=True,
                        unit_divisor=1024, file=self.stream, dynamic_ncols=True) if self.tty else None

    def line(self, have: int) -> str:
        """The plain-mode line: how far, how fast, how long to go."""
        return (f"{self.label}: {100 * have / self.total:.0f}%  {human_bytes(have)} / {human_bytes(self.total)}"
                f"  {human_rate(self.meter.rate())}  ETA {human_duration(self.meter.eta(self.total))}")

    def __call__(self, have: int, total: int | None = None) -> None:
        now = self.clock()
        self.meter.add(now, have)
        finished = have >= self.total
        if self.bar is not None:
            self.bar.update(have - self.bar.n)  # negative when a download starts over
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
        if self.bar is not None:
            self.bar.close()


class CountProgress:
    """Steps of a known count (tensors quantized): same two modes as ByteProgress; the
    ETA is from the average pace of the whole run."""

    def __init__(self, label: str, stream=None, tty: bool | None = None, clock=time.monotonic):
        self.label = label
        self.stream = stream or sys.stdout
        self.tty = self.stream.isatty() if tty is None else tty
        self.clock = clock
        self.meter = RateMeter(window=float("inf"))
        self.meter.add(clock(), 0)
        self.last_pct = 0      # plain mode: a line at 25%, 50%, 75% and 100%
        self.bar = None        # the terminal bar, made at the first step (when n is known)
        self.done = False

    def __call__(self, i: int, n: int, what: str = "") -> None:
        self.meter.add(self.clock(), i)
        finished = i >= n
        if self.tty:
            if self.bar is None:
                self.bar = tqdm(total=n, desc=self.label, unit="tensor", file=self.stream, dynamic_ncols=True)
            self.bar.total = n
            self.bar.set_postfix_str(what, refresh=False)
            self.bar.update(i - self.bar.n)
        else:
            pct = 100 * i / max(1, n)
            if finished or int(pct) // 25 > self.last_pct:
                self.stream.write(f"{self.label}  {i}/{n} {pct:5.1f}%  ETA {human_duration(self.meter.eta(n))}\n")
                self.stream.flush()
                self.last_pct = int(pct) // 25
        if finished:
            self.close()

    def close(self) -> None:
        if not self.done:
            self.done = True
            if self.bar is not None:
                self.bar.close()
