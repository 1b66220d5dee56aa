"""The engine computes with fewer threads while other programs keep the cores busy, and with
all of them again once they stop (engine/cpu_share.py), on the real model and real load."""

from __future__ import annotations

import multiprocessing
import time

import pytest

from edge_infer.engine import Request, SamplingParams, cpu_share


def spin() -> None:
    while True:
        pass


def generate_until(engine, condition, deadline_s: float = 30.0) -> bool:
    """Keep the engine stepping (the governor samples between steps) until condition()."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        engine.generate(Request(prompt="Count slowly:", sampling=SamplingParams(temperature=0, max_tokens=16,
                                                                               ignore_eos=True)))
        if condition():
            return True
    return False


def test_threads_follow_other_programs_load(make_engine, monkeypatch):
    import os

    if (os.cpu_count() or 1) < 2:
        pytest.skip("one CPU: nothing to give back")
    monkeypatch.setattr(cpu_share, "FOLLOW_LOAD", True)  # the suite's conftest turns it off
    engine = make_engine(ctx=512, parallel=1, n_threads=os.cpu_count())
    assert engine.snapshot().threads == os.cpu_count()
    loops = [multiprocessing.get_context("spawn").Process(target=spin, daemon=True) for _ in range(os.cpu_count())]
    for p in loops:
        p.start()
    try:
        assert generate_until(engine, lambda: engine.snapshot().threads < os.cpu_count()), engine.snapshot()
        assert engine.snapshot().other_load_cores > 1.0
    finally:
        for p in loops:
            p.terminate()
            p.join()
    assert generate_until(engine, lambda: engine.snapshot().threads == os.cpu_count()), engine.snapshot()
