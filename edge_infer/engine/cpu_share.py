"""How ggml's CPU threads should wait while the engine serves: spinning a little before they
sleep (the threadpool's poll, 50 by default as llama-server) on an idle machine, sleeping at
once (poll 0) while other programs keep cores busy.

Measured on 2 cores (SmolLM2, decode tok/s of 48-token replies, median of 3, in one process):

    idle, poll 50, 2 threads  65.2     beside two busy loops, poll 50, 2 threads  25.2
    idle, poll 50, 1 thread   45.6     beside two busy loops, poll 50, 1 thread   27.7
    idle, poll 0,  2 threads  62.3     beside two busy loops, poll 0,  2 threads  36.7
    idle, poll 0,  1 thread   42.9     beside two busy loops, poll 0,  1 thread   26.7

A spinning worker burns the time slice the busy programs would otherwise share with its
siblings; fewer threads only lose compute. So the thread count stays, the spinning goes.

The governor samples the machine's busy CPU time and this process's own once a second; what
the machine spent beyond this process is other programs' load, in cores. Decisions are pure
(poll_for) and unit-tested with faked samples; the engine applies them between steps (a new
threadpool with the other poll; engine/threadpool.py).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass

INTERVAL_S = 1.0      # between samples
SMOOTHING = 0.5       # weight of the newest sample in the load estimate
FOLLOW_LOAD = True    # the test suite turns it off (its own servers load the machine)
MARGIN = 0.5          # a core counts as taken when others use more than half of it


@dataclass(frozen=True)
class CpuSample:
    wall: float      # seconds, monotonic
    busy: float      # CPU seconds the whole machine spent busy (every core)
    ours: float      # CPU seconds this process spent


def read_sample() -> CpuSample:
    import psutil

    t = psutil.cpu_times()
    # guest time is already inside user time; steal (another VM ran) counts as busy
    busy = sum(t) - t.idle - getattr(t, "iowait", 0.0) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)
    p = _this_process().cpu_times()
    return CpuSample(time.monotonic(), busy, p.user + p.system)


@functools.cache
def _this_process():
    import psutil

    return psutil.Process()


def others_load(prev: CpuSample, now: CpuSample) -> float:
    """Cores' worth of CPU other programs used between two samples (never below 0)."""
    wall = now.wall - prev.wall
    if wall <= 0:
        return 0.0
    return max(0.0, ((now.busy - prev.busy) - (now.ours - prev.ours)) / wall)


def poll_for(configured: int, others: float) -> int:
    """The configured poll on an idle machine; 0 (sleep at once) while others use more than
    MARGIN of a core."""
    return 0 if others > MARGIN else configured


class SpinGovernor:
    def __init__(self, configured: int, apply: Callable[[int], None],
                 read: Callable[[], CpuSample] = read_sample, enabled: bool = True,
                 clock: Callable[[], float] = time.monotonic):
        """configured: the poll the user chose; only a spinning one (> 0) is ever changed."""
        self.configured, self.apply, self.read, self.clock = configured, apply, read, clock
        self.enabled = enabled and FOLLOW_LOAD and configured > 0
        self.poll = configured
        self.others = 0.0
        self._prev = read() if self.enabled else None
        self._pending: int | None = None   # a change must be seen twice in a row (no flapping)

    def tick(self) -> None:
        """Call between steps: samples at most once per INTERVAL_S, changes the poll when the
        same new one was decided twice in a row."""
        if not self.enabled or self.clock() - self._prev.wall < INTERVAL_S:
            return  # every step comes here: only a clock read until a sample is due
        now = self.read()
        load = others_load(self._prev, now)
        self._prev = now
        self.others = SMOOTHING * load + (1 - SMOOTHING) * self.others
        want = poll_for(self.configured, self.others)
        if want == self.poll:
            self._pending = None
        elif want == self._pending:
            self.poll, self._pending = want, None
            self.apply(want)
        else:
            self._pending = want
