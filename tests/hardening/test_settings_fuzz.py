"""Accepted `serve` settings x the request shapes of every route, near their limits: every
answer is a 2xx or a 4xx and the process lives. llama.cpp aborts the whole process on some
size combinations (--n-batch 300 and an embeddings batch of 253-256 tokens did); each
setting runs as its own `serve` process, so an abort is one failed case. More settings
with `pytest --slow`."""

from __future__ import annotations

import concurrent.futures
import subprocess
import sys
import time

import httpx
import pytest

from tests.server.conftest import short_socket_path

SETTINGS = [
    pytest.param(["--n-batch", "1", "--parallel", "1", "--ctx", "256"], id="n_batch-1"),
    pytest.param(["--n-batch", "7", "--parallel", "4", "--ctx", "512"], id="n_batch-7"),
    pytest.param(["--n-batch", "300", "--parallel", "2", "--ctx", "512"], id="n_batch-300"),
    pytest.param(["--n-batch", "2048", "--ctx", "256", "--parallel", "2"], id="n_batch-over-ctx"),
    pytest.param(["--cache-type-k", "q8_0", "--cache-type-v", "q4_0", "--flash-attn", "on", "--kv-split",
                  "--parallel", "2", "--ctx", "512"], id="quantized-kv-split"),
]
SLOW_SETTINGS = [
    pytest.param(["--n-batch", "100", "--parallel", "8", "--ctx", "128"], id="tiny-ctx-8-slots", marks=pytest.mark.slow),
    pytest.param(["--n-batch", "256", "--parallel", "256", "--ctx", "64"], id="256-slots", marks=pytest.mark.slow),
    pytest.param(["--flash-attn", "off", "--n-batch", "333", "--ctx", "1000"], id="fa-off-odd", marks=pytest.mark.slow),
    pytest.param(["--draft-max", "0", "--n-batch", "64", "--parallel", "3", "--ctx", "300"], id="no-drafts",
                 marks=pytest.mark.slow),
    pytest.param(["--kv-budget", "64cells", "--parallel", "4", "--ctx", "512"], id="small-pool", marks=pytest.mark.slow),
]


def words(n: int, w: str = "a") -> str:
    return (w + " ") * n


def shapes(ctx: int, limit: int) -> list[tuple[str, dict]]:
    """(route, body) near each limit: `ctx` the context, `limit` the embedding input's."""
    chat = lambda content, **extra: ("/v1/chat/completions", {  # noqa: E731
        "model": "smollm2", "messages": [{"role": "user", "content": content}], "max_tokens": 4, **extra})
    return [
        ("/v1/embeddings", {"input": [words(limit - 2), words(limit - 1, "b"), words(limit, "c")]}),
        ("/v1/embeddings", {"input": [words(limit + 1)]}),
        ("/v1/embeddings", {"input": [words(253), words(254, "b"), words(255, "c"), words(256, "d")]}),
        # 300 inputs where a decode holds many; at tiny batch sizes each embedding decode costs
        # seconds on this llama.cpp (measured: --n-batch 16, 40 inputs 22 s), so fewer there.
        ("/v1/embeddings", {"input": [f"item {i}" for i in range(300 if limit >= 64 else 12)]}),
        chat(words(ctx - 40)), chat(words(ctx)), chat(words(2 * ctx)),
        chat("Count to ten.", stop=[str(i) for i in range(4)] + ["x" * 200]),
        chat("Say a JSON object.", response_format={"type": "json_object"}),
        chat("Pick one.", n=16, temperature=1.0),
        chat("Hello", logprobs=True, top_logprobs=20),
        ("/v1/completions", {"model": "smollm2", "prompt": [1, 2, 3] * (ctx // 3 + 1), "max_tokens": 2}),
        ("/v1/completions", {"model": "smollm2", "prompt": "Once", "max_tokens": ctx, "ignore_eos": True}),
        ("/tokenize", {"content": words(2 * ctx)}),
        ("/api/chat", {"model": "smollm2", "stream": False, "messages": [{"role": "user", "content": words(ctx)}],
                       "options": {"num_predict": 4, "num_ctx": ctx * 2}}),
        ("/v1/messages", {"model": "smollm2", "max_tokens": 4, "messages": [{"role": "user", "content": words(ctx)}]}),
    ]


@pytest.mark.parametrize("flags", SETTINGS + SLOW_SETTINGS)
def test_every_route_answers_under_every_accepted_setting(smollm2_path, flags):
    ctx = int(flags[flags.index("--ctx") + 1]) if "--ctx" in flags else 4096
    sock = short_socket_path()
    proc = subprocess.Popen([sys.executable, "-m", "edge_infer", "serve", str(smollm2_path), "--socket", sock,
                             "--threads", "2", *flags], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        client = httpx.Client(transport=httpx.HTTPTransport(uds=sock, retries=30), base_url="http://localhost",
                              timeout=300)
        for _ in range(600):  # until it serves (or dies)
            assert proc.poll() is None, f"serve {flags} ended at start: {proc.stderr.read()[-2000:]}"
            try:
                if client.get("/health").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        limit = client.get("/props").json()["settings"]["n_batch"]  # an embedding input's limit is about it
        answers = []
        for route, body in shapes(ctx, min(limit, ctx)):
            r = client.post(route, json=body)
            answers.append((route, r.status_code, r.text[:200]))
            assert proc.poll() is None, f"serve {flags} died on {route}: {proc.stderr.read()[-3000:]}"
        with concurrent.futures.ThreadPoolExecutor(8) as pool:  # a burst beside each other
            burst = list(pool.map(lambda i: client.post("/v1/chat/completions", json={
                "model": "smollm2", "max_tokens": 8, "messages": [{"role": "user", "content": f"Story {i}"}]}),
                range(8)))
        answers += [("burst", r.status_code, r.text[:200]) for r in burst]
        wrong = [a for a in answers if not (200 <= a[1] < 300 or 400 <= a[1] < 500)]
        assert not wrong, wrong
        assert client.get("/health").status_code == 200 and proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(30)
