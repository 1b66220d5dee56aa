"""A fixed workload and closed-loop clients that drive it at a given concurrency.

Each client takes the next prompt, sends it, reads the whole stream, and repeats. The
same prompts go to every system under test so the numbers compare side by side.
"""

from __future__ import annotations

import asyncio
import inspect
import statistics
import threading
import time
from dataclasses import asdict, dataclass
from typing import Callable

from edge_infer.engine.stats import decode_rate, percentile

QUESTIONS = [
    "Explain in detail how photosynthesis works.",
    "Write a long story about a robot who learns to paint.",
    "Describe the history of the Roman Empire in detail.",
    "Explain how a computer processor executes instructions.",
    "Write a detailed guide to growing tomatoes at home.",
    "Describe the water cycle and why it matters for life on Earth.",
    "Explain how vaccines train the immune system.",
    "Write a letter to a friend describing a trip to the mountains.",
    "Explain the difference between weather and climate in detail.",
    "Describe how bread is made, step by step.",
    "Explain how the internet routes a message from one computer to another.",
    "Write a story about a lighthouse keeper and a storm.",
    "Describe the life cycle of a star.",
    "Explain why the sky is blue and sunsets are red.",
    "Write a detailed review of an imaginary restaurant.",
    "Explain how electric cars work and how they differ from petrol cars.",
]


def median_pass(passes: list["PassResult"]) -> "PassResult":
    """The middle pass by aggregate tok/s (repeats on a noisy machine)."""
    return sorted(passes, key=lambda p: p.agg_tok_s)[len(passes) // 2]


def cycle(items: list, n: int) -> list:
    """The first n of items, items, items, ... (a workload of n requests)."""
    return (items * (n // len(items) + 1))[:n]


@dataclass
class RequestResult:
    ttft_s: float
    tokens: int
    decode_tok_s: float
    latency_s: float
    error: str | None = None

    @classmethod
    def timed(cls, t0: float, first: float | None, end: float, n: int) -> "RequestResult":
        """A finished stream: sent at t0, first token at `first` (None: none came), done at `end`."""
        first = first or end
        return cls(first - t0, n, decode_rate(n, first, end), end - t0)


@dataclass
class PassResult:
    system: str
    concurrency: int
    requests: int
    errors: int
    tokens: int
    wall_s: float
    agg_tok_s: float
    per_req_tok_s: float
    ttft_p50_s: float
    ttft_p95_s: float
    mem_mib: float  # RSS the system added to the process when it was loaded

    def to_dict(self) -> dict:
        return asdict(self)


# A client call: prompt -> RequestResult. It must not raise; errors go in the result.
# An `async def` client runs all its clients on one event loop, the way a server does.
Client = Callable[[str], RequestResult]


def parse_levels(text: str) -> list[int]:
    """'1,2,4,8' -> [1, 2, 4, 8]; anything else is a clear error."""
    from edge_infer.errors import EdgeInferError

    try:
        levels = sorted({int(c) for c in text.split(",") if c.strip()})
    except ValueError:
        levels = []
    if not levels or min(levels) < 1:
        raise EdgeInferError("--concurrency needs positive integers like 1,2,4,8")
    return levels


def run_pass(system: str, client: Client, prompts: list[str], concurrency: int,
             rss: Callable[[], int]) -> PassResult:
    """`rss()` gives the system's memory in bytes, recorded in the result."""
    results: list[RequestResult] = []
    lock = threading.Lock()
    it = iter(prompts)

    def worker():
        while True:
            with lock:
                prompt = next(it, None)
            if prompt is None:
                return
            r = client(prompt)
            with lock:
                results.append(r)

    async def async_worker():
        for prompt in it:  # one loop thread: no lock needed
            results.append(await client(prompt))

    async def run_async():
        await asyncio.gather(*(async_worker() for _ in range(concurrency)))

    t0 = time.perf_counter()
    if inspect.iscoroutinefunction(client):
        asyncio.run(run_async())
    else:
        threads = [threading.Thread(target=worker) for _ in range(concurrency)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return summarize(system, concurrency, results, time.perf_counter() - t0, rss())


def summarize(system: str, concurrency: int, results: list[RequestResult], wall: float,
              mem_bytes: int) -> PassResult:
    """One pass's requests -> the row the tables print (shared by bench and loadtest)."""
    ok = [r for r in results if r.error is None]
    tokens = sum(r.tokens for r in ok)
    ttfts = [r.ttft_s for r in ok]
    return PassResult(
        system=system, concurrency=concurrency, requests=len(results), errors=len(results) - len(ok),
        tokens=tokens, wall_s=wall, agg_tok_s=tokens / wall if wall > 0 else 0.0,
        per_req_tok_s=statistics.median([r.decode_tok_s for r in ok]) if ok else 0.0,
        ttft_p50_s=percentile(ttfts, 0.5), ttft_p95_s=percentile(ttfts, 0.95),
        mem_mib=mem_bytes / 2**20)
