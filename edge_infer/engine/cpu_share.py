"""How many CPU threads the engine should compute with now: all it was given on an idle
machine, fewer while other programs keep cores busy.

ggml's CPU threads meet at a spinning barrier after every operation. When another program
holds a core, the thread the others wait for is off the CPU for a whole scheduler slice,
and every op waits that long: with threads = cores beside two busy loops on 2 cores, decode
fell to 0.15x of its idle speed (issue 37). With one thread per core the others leave free,
nobody waits at a barrier for a descheduled thread.

The governor samples the machine's busy CPU time and this process's own once a second; what
the machine spent beyond this process is other programs' load, in cores. Decisions are pure
(threads_for) and unit-tested with faked samples; the engine applies them between steps
(llama_set_n_threads; the persistent threadpool runs the first n of its threads).
"""

from __future__ import annotations

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
    idle = t.idle + getattr(t, "iowait", 0.0)
    total = sum(t)
    p = psutil.Process().cpu_times()
    return CpuSample(time.monotonic(), total - idle, p.user + p.system)


def others_load(prev: CpuSample, now: CpuSample) -> float:
    """Cores' worth of CPU other programs used between two samples (never below 0)."""
    wall = now.wall - prev.wall
    if wall <= 0:
        return 0.0
    return max(0.0, ((now.busy - prev.busy) - (now.ours - prev.ours)) / wall)


def threads_for(configured: int, cores: int, others: float) -> int:
    """The configured threads on an idle machine; else one per core others leave free (at
    least one, never more than configured)."""
    taken = int(others + 1 - MARGIN) if others > MARGIN else 0   # rounded: 0.8 cores busy -> one taken
    return max(1, min(configured, cores - taken))


class ThreadGovernor:
    def __init__(self, configured: int, cores: int, apply: Callable[[int], None],
                 read: Callable[[], CpuSample] = read_sample, enabled: bool = True):
        self.configured, self.cores, self.apply, self.read = configured, max(1, cores), apply, read
        self.enabled = enabled and FOLLOW_LOAD and configured > 1
        self.threads = configured
        self.others = 0.0
        self._prev = read() if self.enabled else None
        self._pending: int | None = None   # a change must be seen twice in a row (no flapping)

    def tick(self) -> None:
        """Call between steps: samples at most once per INTERVAL_S, changes threads when the
        same new count was decided twice in a row."""
        if not self.enabled:
            return
        now = self.read()
        if now.wall - self._prev.wall < INTERVAL_S:
            return
        load = others_load(self._prev, now)
        self._prev = now
        self.others = SMOOTHING * load + (1 - SMOOTHING) * self.others
        want = threads_for(self.configured, self.cores, self.others)
        if want == self.threads:
            self._pending = None
        elif want == self._pending:
            self.threads, self._pending = want, None
            self.apply(want)
        else:
            self._pending = want
