"""The thread governor's decisions, with faked CPU samples (engine/cpu_share.py)."""

from __future__ import annotations

import pytest

from edge_infer.engine import cpu_share
from edge_infer.engine.cpu_share import CpuSample, ThreadGovernor, others_load, threads_for


@pytest.fixture(autouse=True)
def follow_load(monkeypatch):
    monkeypatch.setattr(cpu_share, "FOLLOW_LOAD", True)  # the suite's conftest turns it off


def test_other_programs_load_is_the_machines_busy_time_beyond_ours():
    a, b = CpuSample(0.0, 10.0, 4.0), CpuSample(1.0, 12.0, 3.5 + 0.5 + 1.0)
    assert others_load(a, b) == 1.0          # 2 busy cores, 1 of them ours
    assert others_load(a, CpuSample(1.0, 11.0, 6.0)) == 0.0  # never below zero (rounding)
    assert others_load(a, a) == 0.0


def test_threads_follow_the_cores_other_programs_leave():
    assert threads_for(configured=2, cores=2, others=0.0) == 2
    assert threads_for(2, 2, 0.2) == 2       # background noise takes no core
    assert threads_for(2, 2, 0.8) == 1       # a busy core
    assert threads_for(2, 2, 2.0) == 1       # at least one
    assert threads_for(8, 16, 9.5) == 6      # a big machine: what is left
    assert threads_for(4, 8, 1.0) == 4       # hyperthreads left free: all configured


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


def test_the_governor_changes_threads_after_two_agreeing_samples_and_back():
    m, applied = Machine(), []
    gov = ThreadGovernor(configured=2, cores=2, apply=applied.append, read=m.sample)
    for _ in range(3):
        m.advance(1.0)
        gov.tick()
    assert applied == [] and gov.threads == 2
    m.others = 2.0  # two busy loops start
    for _ in range(3):
        m.advance(1.0)
        gov.tick()
    assert applied == [1] and gov.threads == 1
    m.advance(0.2)
    gov.tick()  # sampled at most once a second
    m.others = 0.0
    for _ in range(6):
        m.advance(1.0)
        gov.tick()
    assert applied == [1, 2] and gov.threads == 2


def test_one_sample_of_load_changes_nothing_and_a_fixed_count_never_changes():
    m, applied = Machine(), []
    gov = ThreadGovernor(configured=2, cores=2, apply=applied.append, read=m.sample)
    m.others = 2.0
    m.advance(1.0)
    gov.tick()
    m.others = 0.0
    for _ in range(3):
        m.advance(1.0)
        gov.tick()
    assert applied == []
    fixed = ThreadGovernor(configured=2, cores=2, apply=applied.append, read=m.sample, enabled=False)
    m.others = 2.0
    for _ in range(4):
        m.advance(1.0)
        fixed.tick()
    assert applied == [] and fixed.threads == 2
