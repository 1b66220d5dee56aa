"""The spin governor's decisions, with faked CPU samples and step times (engine/cpu_share.py,
engine/spin_trial.py)."""

from __future__ import annotations

import time

import pytest

from edge_infer.engine import cpu_share
from edge_infer.engine.cpu_share import CpuSample, LoadWatch, SpinGovernor, others_load, poll_for, threads_for
from edge_infer.engine.spin_trial import Setting, Trial


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
    return SpinGovernor(watch=watch, clock=lambda: m.t, **kw), watch


# Faked step times (seconds per one-token step) by setting: beside a streaming client the
# configured two spinning threads stay fastest; beside two busy loops one sleeping thread is.
CLIENT = {Setting(50, 2): 0.020, Setting(0, 2): 0.022, Setting(0, 1): 0.030}
BUSY = {Setting(50, 2): 0.080, Setting(0, 2): 0.045, Setting(0, 1): 0.033}


def step(m: Machine, gov: SpinGovernor, watch: LoadWatch, samples: int = 1, costs: dict | None = None,
         tokens: int = 1) -> None:
    """`samples` of the watch's intervals pass, then the engine decodes a step (taking what
    `costs` says for the setting in place)."""
    for _ in range(samples):
        m.advance(cpu_share.INTERVAL_S)
        watch.sample()
    gov.tick(tokens)
    seconds = (costs or {}).get(gov.setting, 0.02)
    m.advance(seconds)
    gov.record(tokens, seconds)


def run_trial(m, gov, watch, costs) -> list[Setting]:
    """Steps until the trial under way ends: the settings it decoded with, in order."""
    used = []
    while gov.trial is not None:
        step(m, gov, watch, 0, costs)
        used.append(gov.setting)
    return used


def test_a_trial_starts_after_two_agreeing_samples_and_ends_with_the_load():
    m, applied = Machine(), []
    gov, watch = governed(m, configured=50, apply=applied.append)
    step(m, gov, watch, 3)
    assert applied == [] and gov.poll == 50 and gov.trial is None
    m.others = 2.0  # two busy loops start
    step(m, gov, watch)
    assert gov.trial is None                # one sample: not yet
    step(m, gov, watch)
    assert gov.trial is not None and gov.trial.candidates == (Setting(50, 0), Setting(0, 0)) and gov.others > 1.0
    run_trial(m, gov, watch, {Setting(50, 0): 0.08, Setting(0, 0): 0.03})
    assert applied[-1] == 0 and gov.poll == 0
    m.others = 0.0
    for _ in range(6):
        step(m, gov, watch)
    assert applied[-1] == 50 and gov.poll == 50


def test_a_machine_busy_before_a_request_is_tried_from_its_first_step():
    """The watch samples while the engine is idle: the first step after a quiet spell starts the trial."""
    m, applied, threads = Machine(), [], []
    m.mine = 0.0  # the engine waits for requests
    gov, watch = governed(m, configured=50, apply=applied.append, threads=2, apply_threads=threads.append, cores=2)
    m.others = 2.0
    for _ in range(8):
        m.advance(cpu_share.INTERVAL_S)
        watch.sample()
    assert applied == [] and threads == [] and gov.trial is None  # nothing happens off the decoding thread
    step(m, gov, watch, 0, BUSY)
    assert gov.trial is not None
    run_trial(m, gov, watch, BUSY)
    step(m, gov, watch, 0, BUSY)
    assert (applied[-1], threads[-1]) == (0, 1)


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


def test_beside_a_streaming_client_the_configured_threads_are_kept_when_they_measure_fastest():
    """The issue-50 case: a client on the same machine reads as most of a core of other load;
    the load alone would drop to one sleeping thread, the step times keep both spinning."""
    m, polls, threads = Machine(), [], []
    gov, watch = governed(m, configured=50, apply=polls.append, threads=2, apply_threads=threads.append, cores=2)
    m.others = 0.8
    step(m, gov, watch, 3, CLIENT)   # smoothed: 0.4, 0.6, 0.7 cores: the last two agree
    assert gov.trial is not None and gov.trial.candidates == (Setting(50, 2), Setting(0, 2), Setting(0, 1))
    used = run_trial(m, gov, watch, CLIENT)
    assert used[:8] == [Setting(50, 2)] * 3 + [Setting(0, 2)] * 4 + [Setting(0, 1)]   # windows of 4 in turn
    assert set(used) == set(CLIENT) and len(used) == 3 * 3 * 4 - 1
    step(m, gov, watch, 1, CLIENT)
    assert gov.setting == Setting(50, 2) and (polls[-1], threads[-1]) == (50, 2)
    assert gov.verdict.startswith("poll 50, 2 threads beside 0.7 cores") and "poll 0, 1 thread: 30.0 ms" in gov.verdict


def test_beside_busy_loops_the_fastest_measured_setting_is_kept_then_tried_again():
    m, polls, threads = Machine(), [], []
    gov, watch = governed(m, configured=50, apply=polls.append, threads=2, apply_threads=threads.append, cores=2)
    m.others = 2.0
    step(m, gov, watch, 2, BUSY)
    run_trial(m, gov, watch, BUSY)
    for _ in range(20):  # the verdict holds while the load does
        step(m, gov, watch, 1, BUSY)
        assert gov.setting == Setting(0, 1) and gov.trial is None
    m.t += cpu_share.RETRY_S
    step(m, gov, watch, 1, BUSY)
    assert gov.trial is not None   # tried again: the machine may have changed meanwhile
    faster_now = {**BUSY, Setting(0, 2): 0.030}
    run_trial(m, gov, watch, faster_now)
    step(m, gov, watch, 1, faster_now)
    assert gov.setting == Setting(0, 2)


def test_once_the_load_ends_the_configured_setting_comes_back_at_once_without_a_trial():
    m, polls, threads = Machine(), [], []
    gov, watch = governed(m, configured=50, apply=polls.append, threads=2, apply_threads=threads.append, cores=2)
    m.others = 2.0
    step(m, gov, watch, 2, BUSY)
    for _ in range(5):           # mid-trial
        step(m, gov, watch, 0, BUSY)
    assert gov.setting != Setting(50, 2)
    m.others = 0.0
    for _ in range(4):
        step(m, gov, watch, 1, BUSY)
    assert gov.setting == Setting(50, 2) and gov.trial is None and (polls[-1], threads[-1]) == (50, 2)


def test_a_change_of_load_mid_trial_starts_a_trial_of_its_own():
    m = Machine()
    gov, watch = governed(m, configured=50, apply=lambda p: None, threads=8, cores=8)
    m.others = 2.0
    step(m, gov, watch, 8)   # the smoothed estimate settles
    first = gov.trial
    assert first.candidates[-1] == Setting(0, 6)
    m.others = 5.0
    step(m, gov, watch, 8)
    assert gov.trial is not first and gov.trial.candidates[-1] == Setting(0, 3)


def test_only_steps_of_the_most_common_size_are_compared_and_not_the_first_after_a_switch():
    trial = Trial((Setting(50, 2), Setting(0, 1)), window=3, rounds=2)
    times = {Setting(50, 2): 0.02, Setting(0, 1): 0.03}
    while not trial.done:
        first = trial._in_window == 0
        # a step with a short prompt chunk lands in one window, and every switch's first step is slow
        tokens = 40 if (trial.current == Setting(0, 1) and trial._turn == 1 and not first) else 1
        trial.record(tokens, 5.0 if first else times[trial.current] * (40 if tokens > 1 else 1))
    assert trial.per_step() == {Setting(50, 2): 0.02, Setting(0, 1): 0.03}
    assert trial.winner() == Setting(50, 2)


def test_steps_too_mixed_to_compare_get_more_rounds_then_the_load_decides():
    m, polls = Machine(), []
    gov, watch = governed(m, configured=50, apply=polls.append, threads=2, apply_threads=lambda n: None, cores=2)
    m.others = 2.0
    step(m, gov, watch, 2)
    steps = 1
    while gov.trial is not None:
        # each candidate happens to decode steps of another size (others' prompts come and go)
        size = 1 + 10 * gov.trial.candidates.index(gov.trial.current)
        gov.tick(size)
        gov.record(size, 0.02)
        steps += 1
    gov.tick()
    assert steps == (3 + 3) * 3 * 4 and gov.setting == Setting(0, 1) == gov.want(2.0)
    assert gov.verdict.startswith("poll 0, 1 thread")


def test_a_prompt_chunk_decodes_outside_the_trial_on_what_the_load_suggests():
    """A 512-token chunk on two spinning threads beside busy loops took seconds: a chunk runs on
    the load's choice, is not compared, and the step after it (threads switched back) neither."""
    m, threads = Machine(), []
    gov, watch = governed(m, configured=50, apply=lambda p: None, threads=2, apply_threads=threads.append, cores=2)
    m.others = 2.0
    step(m, gov, watch, 2, BUSY)
    trial = gov.trial
    assert trial.current == Setting(50, 2) and gov.setting == Setting(50, 2)
    recorded = len(trial.steps)
    step(m, gov, watch, 0, BUSY, tokens=512)
    assert gov.setting == Setting(0, 1) and len(trial.steps) == recorded       # the load's choice, not counted
    step(m, gov, watch, 0, BUSY)
    assert gov.setting == Setting(50, 2) and len(trial.steps) == recorded       # back in the trial; paid the switch
    step(m, gov, watch, 0, BUSY)
    assert len(trial.steps) == recorded + 1
