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

Tried and left: a ggml barrier that sleeps on a futex after 1024 spins (a patch to ggml-cpu.c).
With two threads beside two busy loops it decoded 40-43 tok/s against one spinning thread's
33-43 (no clear gain for a patched wheel), and on for every pool it cost the idle machine
80-97 tok/s against 104-106. One thread gets what the kernel gives one of three runnable
threads on two cores, about 0.65 of a core; bench-defaults prints it ("cores"). That is when the
busy program shares the engine's session; Linux (autogroup, or a desktop's per-app cgroups)
shares the CPU between sessions first, so beside one other program with two busy loops the
engine's session gets half the machine: others' load reads one core, threads_for picks one
thread, and it runs on a whole core (bench-defaults "apart": 0.95-0.97 cores, 0.59-0.72 of
its idle tok/s). Two threads there would share that core and wait for each other.

A watch thread samples the machine's busy CPU time and this process's own four times a second;
what the machine spent beyond this process is other programs' load, in cores. That load says when
to reconsider, not what to pick: on AMD Zen 4 a client streaming our tokens read as 0.5-1 core of
"other load", and dropping to one sleeping thread for it cost a code edit 22% (21.3 tok/s against
27.2). So under load the governor runs a trial (engine/spin_trial.py): the configured setting, no
spinning, and no spinning on the cores the others leave (poll_for, threads_for) each decode a few
steps in turn, and the fastest is kept for RETRY_S. Unit-tested with faked samples and step
times; the engine applies the choice between steps (the threadpool kept for the other poll,
engine/native/threadpool.py; llama_set_n_threads).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from edge_infer.engine.spin_trial import Setting, Trial

log = logging.getLogger("edge_infer.engine")

INTERVAL_S = 0.25     # between samples: a load that starts with a request is followed within about half a second
SMOOTHING = 0.5       # weight of the newest sample in the load estimate
FOLLOW_LOAD = True    # the test suite turns it off (its own servers load the machine)
MARGIN = 0.5          # a core counts as taken when others use more than half of it
RETRY_S = 30.0        # a trial's verdict holds this long under the same load, then it is tried again


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


class LoadWatch:
    """Other programs' load, sampled every INTERVAL_S on a daemon thread whether or not the engine
    is decoding: a request that arrives on a machine already busy finds the decision made, instead
    of decoding its first second or two on threads that spin against the other programs (the
    first reply beside two busy loops ran at 7-18 tok/s, the next ones at 33-43). Keeps the
    last two smoothed estimates: a change is made only when both agree (no flapping). A sample
    reads /proc twice, about 30 us: four wake-ups a second while a model is loaded."""

    def __init__(self, read: Callable[[], CpuSample] = read_sample, interval: float = INTERVAL_S,
                 background: bool = True):
        self.read, self.interval = read, interval
        self._prev = read()
        self.estimates = (0.0, 0.0)   # (previous, newest), in cores
        self._stop = threading.Event()
        if background:
            threading.Thread(target=self._run, name="edge-infer-load-watch", daemon=True).start()

    def sample(self) -> None:
        now = self.read()
        load = others_load(self._prev, now)
        self._prev = now
        newest = self.estimates[1]
        self.estimates = (newest, SMOOTHING * load + (1 - SMOOTHING) * newest)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.sample()
            except Exception:  # psutil gone at interpreter exit, /proc unreadable: stop watching
                return

    def close(self) -> None:
        self._stop.set()


class SpinGovernor:
    """Between steps, on the decoding thread: the configured poll and threads while the machine is
    otherwise idle; while other programs load it, whichever of the configured setting, no spinning,
    and no spinning on the cores they leave decodes fastest here (a Trial of each in turn, kept for
    RETRY_S, then tried again). The watch says when to try, the step times decide."""

    def __init__(self, configured: int, apply: Callable[[int], None], watch: LoadWatch | None = None,
                 enabled: bool = True, threads: int = 0, apply_threads: Callable[[int], None] = lambda n: None,
                 cores: int = 0, clock: Callable[[], float] = time.monotonic):
        """configured: the poll the user chose; only a spinning one (> 0) is ever changed.
        threads: the threads the user chose (0: leave them), applied with apply_threads, on a
        machine of `cores` physical cores. watch: where the load comes from (a new LoadWatch
        with its thread when none is given)."""
        self.configured, self.apply = configured, apply
        self.enabled = enabled and FOLLOW_LOAD and configured > 0
        self.poll = configured
        self.configured_threads, self.threads, self.apply_threads = threads, threads, apply_threads
        self._configured = Setting(configured, threads)
        self.cores = cores or _physical_cores()
        self.watch = (watch or LoadWatch()) if self.enabled else None
        self.clock = clock
        self._decided: tuple[float, float] | None = None   # the estimates the last tick decided on
        self._level: Setting | None = None   # what the load alone would pick, once two samples agree
        self.trial: Trial | None = None
        self._verdicts: dict[Setting, tuple[Setting, float]] = {}   # level -> (winner, when)
        self.verdict = ""   # the last trial's result, in words (snapshot, log)

    @property
    def others(self) -> float:
        return self.watch.estimates[1] if self.watch else 0.0

    @property
    def setting(self) -> Setting:
        return Setting(self.poll, self.threads)

    def want(self, others: float) -> Setting:
        """What the load alone suggests for `others` cores: a candidate, not the decision."""
        return Setting(poll_for(self.configured, others),
                       threads_for(self.configured_threads, self.cores, others) if self.configured_threads else 0)

    def tick(self, tokens: int = 1) -> None:
        """Call before each step of `tokens` tokens (on the thread that decodes). Until the watch
        has a new sample and while no trial runs, only an identity check."""
        if not self.enabled:
            return
        if self.watch.estimates is not self._decided:
            self._decided = previous, newest = self.watch.estimates
            level = self.want(newest)
            if level == self.want(previous) and level != self._level:
                self._level, self.trial = level, None   # the load changed: a trial of its own
        target = self._target()
        if self.trial is not None and not self.trial.counts(tokens):
            target = self._level   # a prompt chunk: on what the load suggests, outside the trial
        self._use(target)

    def record(self, tokens: int, seconds: float) -> None:
        """Call after each step: its size in tokens and how long llama_decode took."""
        trial = self.trial
        if trial is None:
            return
        trial.record(tokens, seconds)
        if trial.done:
            winner = trial.winner() or self._level   # steps too mixed to compare: the load decides
            self._verdicts[self._level] = (winner, self.clock())
            self.trial = None
            times = trial.per_step() or {}
            self.verdict = (f"{winner} beside {self.others:.1f} cores of other load ("
                            + "; ".join(f"{s}: {t * 1e3:.1f} ms" for s, t in times.items()) + " per step)")
            log.info("CPU threads: %s", self.verdict)

    def _target(self) -> Setting:
        configured, level = self._configured, self._level
        if level is None or level == configured:
            return configured
        if self.trial is not None:
            return self.trial.current
        winner, when = self._verdicts.get(level, (None, 0.0))
        if winner is not None and self.clock() - when < RETRY_S:
            return winner
        candidates = dict.fromkeys([self.setting, configured, Setting(0, self.configured_threads), level])
        self.trial = Trial(tuple(candidates))
        return self.trial.current

    def _use(self, want: Setting) -> None:
        if want.threads != self.threads:
            self.threads = want.threads
            self.apply_threads(want.threads)
        if want.poll != self.poll:
            self.poll = want.poll
            self.apply(want.poll)

    def close(self) -> None:
        if self.watch:
            self.watch.close()


@functools.cache
def _physical_cores() -> int:
    import os

    import psutil

    return psutil.cpu_count(logical=False) or os.cpu_count() or 1
