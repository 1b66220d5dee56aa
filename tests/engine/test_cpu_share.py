"""The spin governor's decisions, with faked CPU samples (engine/cpu_share.py)."""

from __future__ import annotations

import time

import pytest

from edge_infer.engine import cpu_share
from edge_infer.engine.cpu_share import CpuSample, LoadWatch, SpinGovernor, others_load, poll_for, threads_for


@pytest.fixture(autouse=True)
def follow_load(monkeypatch):
    monkeypatch.setattr(cpu_share, "FOLLOW_LOAD", True)  # the suite's conftest turns it off


def test_other_programs_load_is_the_machines_busy_time_beyond_ours():
    a, b = CpuSample(0.0, 10.0, 4.0), CpuSample(1.0, 12.0, 3.5 + 0.5 + 1.0)
    assert others_load(a, b) == 1.0          # 2 busy cores, 1 of them ours
    assert others_load(a, CpuSample(1.0, 11.0, 6.0)) == 0.0  # never below zero (rounding)
    assert others_load(a, a) == 0.0


def test_workers_spin_on_an_idle_machine_and_sleep_at_once_on_a_busy_one():
    assert poll_for(configured=50, others=0.0) == 50
    assert poll_for(50, 0.3) == 50           # background noise: still spin
    assert poll_for(50, 0.8) == 0            # a busy core
    assert poll_for(50, 2.0) == 0


class Machine:
    """A fake clock and load: `others` cores busy besides this process's `ours`."""

    def __init__(self):
        self.t = self.busy = self.ours = 0.0
        self.others, self.mine = 0.0, 2.0

    def advance(self, seconds: float) -> None:
        self.t += seconds
        self.busy += (self.others + self.mine) * seconds
        self.ours += self.mine * seconds

    def sample(self) -> CpuSample:
        return CpuSample(self.t, self.busy, self.ours)


def governed(m: Machine, **kw) -> tuple[SpinGovernor, LoadWatch]:
    watch = LoadWatch(read=m.sample, background=False)
    return SpinGovernor(watch=watch, **kw), watch


def step(m: Machine, gov: SpinGovernor, watch: LoadWatch, samples: int = 1) -> None:
    """`samples` of the watch's intervals pass, then the engine decodes a step."""
    for _ in range(samples):
        m.advance(cpu_share.INTERVAL_S)
        watch.sample()
    gov.tick()


def test_the_governor_changes_the_poll_after_two_agreeing_samples_and_back():
    m, applied = Machine(), []
    gov, watch = governed(m, configured=50, apply=applied.append)
    step(m, gov, watch, 3)
    assert applied == [] and gov.poll == 50
    m.others = 2.0  # two busy loops start
    step(m, gov, watch)
    assert applied == []                    # one sample: not yet
    step(m, gov, watch)
    assert applied == [0] and gov.poll == 0 and gov.others > 1.0
    m.others = 0.0
    for _ in range(6):
        step(m, gov, watch)
    assert applied == [0, 50] and gov.poll == 50


def test_a_machine_busy_before_a_request_is_followed_from_its_first_step():
    """The watch samples while the engine is idle: the first step after a quiet spell applies."""
    m, applied, threads = Machine(), [], []
    m.mine = 0.0  # the engine waits for requests
    gov, watch = governed(m, configured=50, apply=applied.append, threads=2, apply_threads=threads.append, cores=2)
    m.others = 2.0
    for _ in range(8):
        m.advance(cpu_share.INTERVAL_S)
        watch.sample()
    assert applied == [] and threads == []  # nothing is applied off the decoding thread
    gov.tick()
    assert (applied, threads) == ([0], [1])


def test_the_watch_samples_on_its_own_thread_until_closed():
    watch = LoadWatch(read=lambda: CpuSample(time.monotonic(), 2.0 * time.monotonic(), 0.0), interval=0.01)
    deadline = time.monotonic() + 5
    while watch.estimates[0] < 1.0 and time.monotonic() < deadline:
        time.sleep(0.01)
    watch.close()
    assert watch.estimates[0] > 1.0   # two busy cores, none of them ours


def test_one_sample_of_load_changes_nothing_and_a_chosen_poll_never_changes():
    m, applied = Machine(), []
    gov, watch = governed(m, configured=50, apply=applied.append)
    m.others = 2.0
    step(m, gov, watch)
    m.others = 0.0
    step(m, gov, watch, 3)
    assert applied == []
    for enabled, configured in ((False, 50), (True, 0)):  # off, or a poll that already sleeps
        fixed = SpinGovernor(configured=configured, apply=applied.append, enabled=enabled)
        assert fixed.watch is None  # no thread either
        m.others = 2.0
        for _ in range(4):
            fixed.tick()
        assert applied == [] and fixed.poll == fixed.configured and fixed.others == 0.0


def test_threads_follow_the_cores_other_programs_leave():
    assert threads_for(configured=2, cores=2, others=0.3) == 2     # background noise
    assert threads_for(2, 2, 1.0) == 1                              # one core taken
    assert threads_for(2, 2, 2.0) == 1 and threads_for(8, 8, 12.0) == 1  # never below one
    assert threads_for(8, 8, 3.2) == 5 and threads_for(4, 8, 1.0) == 4  # never above the configured


def test_the_governor_decodes_on_fewer_threads_while_the_machine_is_busy_and_back():
    m, polls, threads = Machine(), [], []
    gov, watch = governed(m, configured=50, apply=polls.append, threads=2, apply_threads=threads.append, cores=2)
    m.others = 2.0  # two busy loops
    step(m, gov, watch, 3)
    assert (polls, threads) == ([0], [1]) and (gov.poll, gov.threads) == (0, 1)
    m.others = 0.0
    for _ in range(6):
        step(m, gov, watch)
    assert (polls, threads) == ([0, 50], [1, 2])
