"""HTTP load: closed-loop streaming clients against any OpenAI-compatible server, and the
servers to compare (ours, llama-cpp-python's; llama-server in bench/llama_server.py) started as processes, one at a time.

Clients are async on one event loop (cheap on a 2-core machine that also runs the server).
Tokens are counted from the final usage chunk when the server sends one, else one per
content chunk; TTFT is the time to the first chunk that carries text.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from edge_infer.bench.workload import QUESTIONS, PassResult, RequestResult, cycle, summarize


@dataclass
class Target:
    base_url: str                  # .../v1
    model: str | None = None
    api_key: str | None = None
    uds: str | None = None         # Unix socket path (base_url's host is then ignored)

    def client(self, concurrency: int):
        import httpx

        transport = httpx.AsyncHTTPTransport(uds=self.uds) if self.uds else None
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        return httpx.AsyncClient(base_url=self.base_url, headers=headers, transport=transport, timeout=600,
                                 limits=httpx.Limits(max_connections=concurrency + 4))

    def resolve_model(self) -> str:
        """The model id to send: given, or the first the server lists."""
        if self.model:
            return self.model

        async def ask():
            async with self.client(1) as c:
                r = await c.get("/models")
                r.raise_for_status()
                return r.json()["data"][0]["id"]
        self.model = asyncio.run(ask())
        return self.model


def prompts(n: int) -> list[str]:
    return cycle(QUESTIONS, n)


async def stream_chat(client, model: str, question: str, max_tokens: int, deadline: float | None = None,
                      **extra) -> RequestResult:
    """One streamed chat completion. deadline (time.perf_counter()): the stream is closed there and
    what came so far counts, as a finished request (a server beside busy loops can fall to a
    token every few seconds)."""
    body = {"model": model, "messages": [{"role": "user", "content": question}], "max_tokens": max_tokens,
            "temperature": 0, "stream": True, "stream_options": {"include_usage": True}, **extra}
    t0 = time.perf_counter()
    first, chunks = None, 0   # what came before a deadline counts

    async def read() -> RequestResult:
        nonlocal first, chunks
        usage_tokens, finished = None, False
        async with client.stream("POST", "/chat/completions", json=body) as r:
            if r.status_code != 200:
                return RequestResult(0, 0, 0, 0, error=f"HTTP {r.status_code}: {(await r.aread())[:200]!r}")
            async for line in r.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                obj = json.loads(data)
                if obj.get("error"):
                    return RequestResult(0, chunks, 0, 0, error=str(obj["error"])[:200])
                for choice in obj.get("choices") or ():
                    if (choice.get("delta") or {}).get("content") or choice.get("text"):
                        chunks += 1
                        first = first or time.perf_counter()
                    finished = finished or bool(choice.get("finish_reason"))
                if obj.get("usage"):
                    usage_tokens = obj["usage"].get("completion_tokens")
        if not finished:  # e.g. llama_cpp.server cutting a stream short for a newer request
            return RequestResult(0, chunks, 0, 0, error="the stream ended without a finish_reason")
        n = usage_tokens if usage_tokens is not None else chunks
        return RequestResult.timed(t0, first, time.perf_counter(), n)

    try:
        # wait_for, not asyncio.timeout: Python 3.10 has no asyncio.timeout
        return await asyncio.wait_for(read(), None if deadline is None else max(0.0, deadline - t0))
    except asyncio.TimeoutError:  # the deadline: what came counts (not the builtin TimeoutError on 3.10)
        return RequestResult.timed(t0, first, time.perf_counter(), chunks)
    except Exception as exc:  # connection refused, reset, bad JSON: an error, not a crash
        return RequestResult(0, 0, 0, 0, error=f"{type(exc).__name__}: {exc}")


def run_http_pass(label: str, target: Target, concurrency: int, requests: int, max_tokens: int,
                  rss=lambda: 0, budget_s: float | None = None) -> PassResult:
    """One pass: `requests` prompts (at least one per client) through `concurrency` clients;
    with budget_s, no new request after that many seconds and running streams cut there."""
    model = target.resolve_model()
    todo = iter(prompts(max(requests, concurrency)))
    results: list[RequestResult] = []
    deadline = time.perf_counter() + budget_s if budget_s else None

    async def worker(client):
        for question in todo:  # one event loop: the shared iterator needs no lock
            if deadline and time.perf_counter() >= deadline:
                break
            results.append(await stream_chat(client, model, question, max_tokens, deadline=deadline))

    async def run():
        async with target.client(concurrency) as client:
            await asyncio.gather(*(worker(client) for _ in range(concurrency)))

    t0 = time.perf_counter()
    asyncio.run(run())
    wall = time.perf_counter() - t0
    for r in results:
        if r.error:
            print(f"  {label} error: {r.error}", file=sys.stderr)
    return summarize(label, concurrency, results, wall, rss())


def warm_up(target: Target) -> None:
    model = target.resolve_model()

    async def go():
        async with target.client(1) as c:
            await stream_chat(c, model, QUESTIONS[0], 4)
    asyncio.run(go())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """A server under test in its own process: started, awaited, measured, stopped."""

    def __init__(self, label: str, argv: list[str], port: int, env: dict | None = None):
        self.label, self.argv, self.port, self.env = label, argv, port, env
        self.target = Target(f"http://127.0.0.1:{port}/v1")
        self.proc: subprocess.Popen | None = None
        self.remove_after: list[str] = []   # folders of this run only (a disk cache), removed when it stops

    @classmethod
    def ours(cls, model_path, threads: int, ctx: int, parallel: int, *flags: str) -> "ServerProcess":
        port = free_port()
        return cls("edge-infer", [sys.executable, "-m", "edge_infer", "serve", str(model_path), "--port", str(port),
                                  "--threads", str(threads), "--ctx", str(ctx), "--parallel", str(parallel),
                                  *flags], port)

    @classmethod
    def llama_cpp(cls, model_path, threads: int, ctx: int, flash_attn: bool) -> "ServerProcess":
        port = free_port()
        return cls("llama_cpp", [sys.executable, "-m", "edge_infer.bench.llama_cpp_server", "--model", str(model_path),
                                 "--host", "127.0.0.1", "--port", str(port), "--n_threads", str(threads),
                                 "--n_threads_batch", str(threads), "--n_ctx", str(ctx),
                                 "--flash_attn", str(flash_attn),
                                 # By default a new request cuts the running stream short; queue instead.
                                 "--interrupt_requests", "False"], port)

    def __enter__(self) -> "ServerProcess":
        import httpx

        # Its log goes to a file: an unread pipe fills up with llama.cpp's load log and blocks it.
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(self.argv, stdout=self.log, stderr=subprocess.STDOUT, env=self.env)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.log.seek(0)
                raise RuntimeError(f"{self.label} exited: {self.log.read().decode(errors='replace')[-2000:]}")
            try:
                if httpx.get(self.target.base_url + "/models", timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        self.__exit__()
        raise RuntimeError(f"{self.label} did not answer within 180 s")

    def rss(self) -> int:
        import psutil

        try:
            return psutil.Process(self.proc.pid).memory_info().rss
        except (psutil.Error, AttributeError):
            return 0

    def __exit__(self, *exc) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if getattr(self, "log", None):
            self.log.close()
        for path in self.remove_after:
            shutil.rmtree(path, ignore_errors=True)
