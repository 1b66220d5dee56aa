"""Many models behind one server (`edge-infer bench-models`): what a switch costs (time to
first token for a model that must load vs one that is loaded), two models served at once
vs each alone on the same cores, and the RSS peak of a switch under a budget for one model.

The server runs as its own process (`edge-infer serve`), so its RSS is its own; clients are
async on one event loop here.
"""

from __future__ import annotations

import asyncio
import statistics
import threading
import time

import httpx
import psutil

from edge_infer.bench.http import ServerProcess, Target, prompts, stream_chat
from edge_infer.bench.workload import summarize


def serve(first: str, threads: int, ctx: int, parallel: int, *flags: str) -> ServerProcess:
    """`edge-infer serve FIRST` in its own process (the other models load on request)."""
    from edge_infer.bench.memory import edge_infer

    return edge_infer(first, threads, ctx, parallel, *flags)


def state_of(target: Target, model: str) -> str:
    data = httpx.get(target.base_url + "/models", timeout=30).json()["data"]
    return next((m["status"]["value"] for m in data if m["id"] == model), "absent")


def wait_unloaded(target: Target, model: str, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while state_of(target, model) != "unloaded":
        if time.monotonic() > end:
            raise RuntimeError(f"{model} did not unload within {timeout:g} s")
        time.sleep(0.05)


def one(target: Target, model: str, max_tokens: int = 8, **extra):
    async def go():
        async with target.client(1) as c:
            return await stream_chat(c, model, prompts(1)[0], max_tokens, **extra)
    result = asyncio.run(go())
    if result.error:
        raise RuntimeError(f"{model}: {result.error}")
    return result


def switch_cost(target: Target, models: list[str], reps: int = 3) -> list[dict]:
    """Per model: TTFT when it must load first (cold) and when it is loaded (warm)."""
    rows = []
    for model in models:
        cold, warm = [], []
        for _ in range(reps):
            if state_of(target, model) != "unloaded":
                one(target, model, 1, keep_alive=0)
                wait_unloaded(target, model)
            cold.append(one(target, model).ttft_s)
            warm.append(one(target, model).ttft_s)
        rows.append({"model": model, "cold_ttft_s": statistics.median(cold), "warm_ttft_s": statistics.median(warm),
                     "cold_runs": cold, "warm_runs": warm})
    return rows


def concurrent(target: Target, models: list[str], requests: int, max_tokens: int, clients: int = 1) -> list[dict]:
    """Each model alone, then all at once (each with its own `clients` streams)."""
    async def load(model: str, c):
        results = []
        for q in prompts(requests):
            results.append(await stream_chat(c, model, q, max_tokens))
        return results, time.perf_counter()

    async def run(chosen: list[str]):
        async with target.client(clients * len(chosen)) as c:
            t0 = time.perf_counter()
            per = await asyncio.gather(*(asyncio.gather(*(load(m, c) for _ in range(clients))) for m in chosen))
        out = {}
        for m, got in zip(chosen, per):  # each model's rate over its own span: the faster ends first
            wall = max(end for _, end in got) - t0
            out[m] = summarize(m, clients, [r for batch, _ in got for r in batch], wall, 0)
        return out

    for m in models:  # loaded and warm before anything is timed
        one(target, m, 4)
    alone = {m: asyncio.run(run([m]))[m] for m in models}
    together = asyncio.run(run(models))
    return [{"model": m, "alone_tok_s": alone[m].agg_tok_s, "together_tok_s": together[m].agg_tok_s,
             "ratio": together[m].agg_tok_s / alone[m].agg_tok_s if alone[m].agg_tok_s else 0.0,
             "errors": alone[m].errors + together[m].errors} for m in models]


class PeakRSS:
    """The process's RSS sampled every 10 ms in a thread, for a switch's peak."""

    def __init__(self, pid: int):
        self.proc, self.peak, self._stop = psutil.Process(pid), 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, self.proc.memory_info().rss)
            except psutil.Error:
                return
            time.sleep(0.01)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def switch_peak(srv: ServerProcess, models: list[str], rounds: int = 2) -> dict:
    """Alternate between the models under a budget that holds one: the RSS peak."""
    with PeakRSS(srv.proc.pid) as rss:
        for _ in range(rounds):
            for m in models:
                one(srv.target, m, 4)
    data = httpx.get(srv.target.base_url + "/models", timeout=30).json()["data"]
    return {"peak_rss": rss.peak, "loaded_after": [m["id"] for m in data if m["status"]["value"] == "loaded"]}
