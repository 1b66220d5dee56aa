"""In-process systems under test: our engine, and llama-cpp-python's `Llama` served one
request after another (what its Python server does with concurrent requests)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from edge_infer.bench.workload import RequestResult


def engine_client(engine, max_tokens: int):
    from edge_infer.engine import FinishEvent, Request, SamplingParams

    params = SamplingParams(temperature=0.0, max_tokens=max_tokens)

    # Clients share one event loop (as the HTTP server's do): eight client threads waking
    # on every token would take CPU from llama.cpp's own threads on a small machine.
    async def call(prompt: str) -> RequestResult:
        t0 = time.perf_counter()
        try:
            stream = engine.submit(Request(prompt=prompt, sampling=params, source="bench"))
        except Exception as exc:  # queue full, context overflow: counted as errors
            return RequestResult(0, 0, 0, 0, error=str(exc))
        first = None
        n = 0
        async for event in stream:
            if isinstance(event, FinishEvent):
                if event.error:
                    return RequestResult(0, n, 0, 0, error=event.error)
                break
            n += 1
            if first is None:
                first = time.perf_counter()
        return RequestResult.timed(t0, first, time.perf_counter(), n)

    return call


class SerialLlama:
    """llama_cpp.Llama serving one request after another on one worker thread.

    One thread, not one per client: ggml's CPU workers spin after each decode, and a
    decode from a new OS thread starts a second team that fights the first for the cores
    (measured: 73 vs 110 tok/s). Real servers that hop threads pay that; we don't charge it.
    """

    def __init__(self, model_path: str, n_ctx: int, n_threads: int, n_batch: int = 512,
                 flash_attn: bool = False):
        from llama_cpp import Llama

        from edge_infer.engine.native.llama import init_backend

        init_backend()  # the same CPU variant and buffer-type decision as the engine

        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="baseline")
        self.llm = self.pool.submit(
            Llama, model_path=str(model_path), n_ctx=n_ctx, n_threads=n_threads, n_threads_batch=n_threads,
            n_batch=n_batch, flash_attn=flash_attn, verbose=False).result()

    def _complete(self, prompt: str, max_tokens: int) -> tuple[float | None, float, int]:
        first, n = None, 0
        for chunk in self.llm.create_completion(prompt, max_tokens=max_tokens, temperature=0.0, stream=True):
            choice = chunk["choices"][0]
            if choice["finish_reason"] is not None and not choice["text"]:
                continue  # the closing chunk carries no new token
            n += 1
            if first is None:
                first = time.perf_counter()
        return first, time.perf_counter(), n

    def client(self, max_tokens: int):
        def call(prompt: str) -> RequestResult:
            t0 = time.perf_counter()
            try:
                first, end, n = self.pool.submit(self._complete, prompt, max_tokens).result()
            except Exception as exc:
                return RequestResult(0, 0, 0, 0, error=str(exc))
            return RequestResult.timed(t0, first, end, n)

        return call

    def close(self) -> None:
        self.pool.submit(self.llm.close).result()
        self.pool.shutdown()
