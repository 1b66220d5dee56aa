"""How ggml's CPU threads should wait while the engine serves: spinning a little before they
sleep (the threadpool's poll, 50 by default as llama-server) on an idle machine, sleeping at
once (poll 0) while other programs keep cores busy.

Measured on 2 cores (SmolLM2, decode tok/s of 48-token replies, median of 3, in one process):

    idle, poll 50, 2 threads  65.2     beside two busy loops, poll 50, 2 threads  25.2
    idle, poll 50, 1 thread   45.6     beside two busy loops, poll 50, 1 thread   27.7
    idle, poll 0,  2 threads  62.3     beside two busy loops, poll 0,  2 threads  36.7
    idle, poll 0,  1 thread   42.9     beside two busy loops, poll 0,  1 thread   26.7

(Those were measured on an OpenMP build of ggml, which ignored the poll and slept at barriers.
With ggml's own threadpool, GGML_OPENMP=OFF since, workers spin at every op's barrier whatever
the poll: beside two busy loops, two threads fell to 12-27 tok/s from 111-129 idle. So while
other programs keep cores busy the engine also decodes on the cores they leave (threads_for):
one thread there, 26-33 tok/s once the governor has seen two samples.)

The governor samples the machine's busy CPU time and this process's own once a second; what
the machine spent beyond this process is other programs' load, in cores. Decisions are pure
(poll_for, threads_for) and unit-tested with faked samples; the engine applies them between
steps (a new threadpool with the other poll, engine/threadpool.py; llama_set_n_threads).
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


def threads_for(configured: int, cores: int, others: float) -> int:
    """The configured threads on an idle machine; while others keep cores busy, the cores they
    leave (at least one). ggml's workers wait for each other at every op's barrier by spinning:
    one that the OS descheduled for a busy program holds up all the others for its time slice,
    so a thread more than the free cores costs far more than it computes."""
    if others <= MARGIN:
        return configured
    return max(1, min(configured, cores - round(others)))


class SpinGovernor:
    def __init__(self, configured: int, apply: Callable[[int], None],
                 read: Callable[[], CpuSample] = read_sample, enabled: bool = True,
                 clock: Callable[[], float] = time.monotonic, threads: int = 0,
                 apply_threads: Callable[[int], None] = lambda n: None, cores: int = 0):
        """configured: the poll the user chose; only a spinning one (> 0) is ever changed.
        threads: the threads the user chose (0: leave them), applied with apply_threads, on a
        machine of `cores` physical cores."""
        self.configured, self.apply, self.read, self.clock = configured, apply, read, clock
        self.enabled = enabled and FOLLOW_LOAD and configured > 0
        self.poll = configured
        self.configured_threads, self.threads, self.apply_threads = threads, threads, apply_threads
        self.cores = cores or _physical_cores()
        self.others = 0.0
        self._prev = read() if self.enabled else None
        self._pending: tuple[int, int] | None = None   # a change must be seen twice in a row (no flapping)

    def tick(self) -> None:
        """Call between steps: samples at most once per INTERVAL_S, changes the poll when the
        same new one was decided twice in a row."""
        if not self.enabled or self.clock() - self._prev.wall < INTERVAL_S:
            return  # every step comes here: only a clock read until a sample is due
        now = self.read()
        load = others_load(self._prev, now)
        self._prev = now
        self.others = SMOOTHING * load + (1 - SMOOTHING) * self.others
        want = (poll_for(self.configured, self.others),
                threads_for(self.configured_threads, self.cores, self.others) if self.configured_threads else 0)
        if want == (self.poll, self.threads):
            self._pending = None
        elif want == self._pending:
            self._pending = None
            if want[1] != self.threads:
                self.threads = want[1]
                self.apply_threads(want[1])
            if want[0] != self.poll:
                self.poll = want[0]
                self.apply(want[0])
        else:
            self._pending = want


@functools.cache
def _physical_cores() -> int:
    import os

    import psutil

    return psutil.cpu_count(logical=False) or os.cpu_count() or 1
