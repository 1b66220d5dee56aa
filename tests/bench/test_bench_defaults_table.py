"""bench-defaults' table (edge_infer/bench/defaults.py): medians, ratios, and the CPU each server
got beside the busy loops next to what it made of it."""

from __future__ import annotations

import os
import time

from edge_infer.bench.defaults import IDLE, Busy, CpuMeter, Measure, busy_loops, cpu_settings, table


def test_busy_over_idle_sets_tok_s_beside_the_cpu_each_server_got():
    runs, busy = {}, Busy(2, apart=False)
    for loops, edge, llama in ((IDLE, (100.0, 2.0), (90.0, 2.0)), (busy, (30.0, 0.6), (9.0, 1.0))):
        for system, (tok_s, cores) in (("edge-infer", edge), ("llama-server", llama)):
            runs[loops, "chat c=1", system] = [Measure(tok_s * f, 0.07, cores) for f in (0.9, 1.0, 1.2)]
    lines = table(runs, (IDLE, busy)).splitlines()
    assert lines[0].split()[:4] == ["workload", "busy", "loops", "edge-infer"]
    row = lines[2].split()
    assert row[:8] == ["chat", "c=1", "2", "shared", "30.0", "9.0", "3.33", "70"] and row[9:11] == ["0.60", "1.00"]
    assert "27.0 / 30.0 / 36.0" in lines[2]  # every run, as measured
    ratios = lines[-1].split()
    assert ratios == ["chat", "c=1", "2", "shared", "0.30", "0.10", "0.30", "0.50"]  # edge slowed as its CPU; llama more


def test_the_governors_setting_is_listed_per_pass():
    busy = Busy(2, apart=True)
    runs = {(IDLE, "new function", "edge-infer"): [Measure(30.0, 0.1, 1.9, "poll 50, 2 threads")],
            (busy, "new function", "edge-infer"): [Measure(12.0, 0.3, 0.9, "poll 0, 1 threads [trial: ...]")],
            (busy, "new function", "llama-server"): [Measure(3.0, 2.0, 1.0)]}
    assert cpu_settings(runs, (IDLE, busy)).splitlines() == [
        "new function  busy 0         run 1: poll 50, 2 threads",
        "new function  busy 2 apart   run 1: poll 0, 1 threads [trial: ...]"]


def test_the_cpu_meter_reads_a_process_cpu_over_the_wall():
    with CpuMeter(os.getpid()) as cpu:
        end = time.monotonic() + 0.3
        while time.monotonic() < end:
            pass
    assert 0.5 < cpu.cores <= 1.2   # this thread spun the whole time


def test_a_stream_past_its_deadline_counts_what_came():
    """A server beside busy loops can send a token every few seconds: the pass ends at its budget."""
    import asyncio
    import json

    import httpx

    from edge_infer.bench.http import stream_chat

    async def slow_tokens():
        while True:
            chunk = {"choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": None}]}
            yield f"data: {json.dumps(chunk)}\n\n".encode()
            await asyncio.sleep(0.1)

    async def go():
        transport = httpx.MockTransport(lambda request: httpx.Response(200, content=slow_tokens()))
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
            t0 = time.perf_counter()
            r = await stream_chat(client, "m", "q", 64, deadline=t0 + 0.35)
            return r, time.perf_counter() - t0
    r, took = asyncio.run(go())
    assert r.error is None and 2 <= r.tokens <= 5 and took < 1.0


def busy(process) -> bool:
    """Spinning (a loop beside the test run's other children gets well over 20% of a core)."""
    return process.cpu_percent(0.2) > 20


def test_busy_loops_run_as_one_program_apart_or_in_our_session_and_end_with_it():
    """'apart' is a program started elsewhere: its loops share one session of their own, which
    Linux's autogroup gives a share of the CPU as a whole; 'shared' keeps them in ours."""
    import psutil

    me = psutil.Process()
    for apart in (True, False):
        with busy_loops(Busy(2, apart)) as pid:
            # the program and its children, not any other child of the test run (the resource
            # tracker, an earlier test's server ending) that happens to be busy while sampled
            program = psutil.Process(pid)
            assert program in me.children()
            loops = [program, *program.children(recursive=True)]
            assert all(busy(p) for p in loops)
            sessions = {os.getsid(p.pid) for p in loops}
            assert len(loops) == 2 and len(sessions) == 1
            assert (sessions.pop() != os.getsid(0)) == apart
        gone, alive = psutil.wait_procs(loops, timeout=5)
        assert not alive
