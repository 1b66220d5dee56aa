"""Load and lifecycle: a burst on few slots, a full queue answered 429, a client that
leaves cancels its generation, an engine failure mid-stream, and the metrics."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import openai
import pytest
from openai import OpenAI

LONG = {"max_tokens": 2000, "ignore_eos": True, "temperature": 0}


def wait_for(cond, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False


def test_burst_of_32_streams_on_4_slots(served):
    from openai import AsyncOpenAI

    assert served.engine.snapshot().n_slots == 4
    questions = [[{"role": "user", "content": f"Tell me fact number {i} about the sea."}] for i in range(32)]

    async def one(client, messages):
        stream = await client.chat.completions.create(
            model="smollm2", messages=messages, max_tokens=12, logprobs=True, stream=True,
            stream_options={"include_usage": True}, extra_body={"ignore_eos": True})
        tokens, finish, usage = 0, None, None
        async for chunk in stream:
            for c in chunk.choices:
                tokens += len(c.logprobs.content) if c.logprobs else 0  # one entry per token
                finish = c.finish_reason or finish
            usage = chunk.usage or usage
        return tokens, finish, usage

    async def burst():
        async with AsyncOpenAI(base_url=served.base, api_key="unused", max_retries=0) as client:
            return await asyncio.gather(*(one(client, q) for q in questions))

    results = asyncio.run(burst())
    for q, (tokens, finish, usage) in zip(questions, results):
        assert finish == "length" and tokens == 12
        assert usage.completion_tokens == 12
        assert usage.prompt_tokens == len(served.engine.tokenize_messages(q))
        assert usage.total_tokens == usage.prompt_tokens + 12
    snap = served.engine.snapshot()
    assert snap.running == 0 and snap.queued == 0


def test_client_disconnect_cancels_stream(served):
    engine = served.engine
    body = {"messages": [{"role": "user", "content": "Count to a million."}], "stream": True, **LONG}
    with httpx.Client(base_url=served.url, timeout=30) as c:
        with c.stream("POST", "/v1/chat/completions", json=body) as r:
            lines = r.iter_lines()
            assert next(lines).startswith("data: ")  # role chunk
            while '"content"' not in next(lines):
                pass
            assert engine.snapshot().running == 1
        # leaving the block closed the connection mid-stream
    assert wait_for(lambda: engine.snapshot().running == 0 and engine.snapshot().slots_busy == 0)
    # the slot serves the next request
    r = httpx.post(served.base + "/completions", json={"prompt": "Hi", "max_tokens": 2})
    assert r.status_code == 200


def test_client_disconnect_cancels_non_streaming_request(served):
    engine = served.engine
    body = {"messages": [{"role": "user", "content": "Count to a million."}], **LONG}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(served.base + "/chat/completions", json=body, timeout=1.0)
    assert wait_for(lambda: engine.snapshot().running == 0)


def test_full_queue_is_429_with_retry_after_and_queued_disconnect_frees_it(make_served):
    live = make_served(parallel=1, queue_size=1)
    engine = live.engine
    long_body = {"prompt": "Count:", "stream": True, **LONG}
    with httpx.Client(base_url=live.url, timeout=30) as c, httpx.Client(base_url=live.url, timeout=30) as c2:
        with c.stream("POST", "/v1/completions", json=long_body) as running:
            # Keep the iterator: a discarded one closes its connection (that is a disconnect).
            kept = running.iter_lines()
            next(kept)
            with c2.stream("POST", "/v1/completions", json=long_body) as queued:
                assert queued.status_code == 200
                assert wait_for(lambda: engine.snapshot().queued == 1)
                r = httpx.post(live.base + "/completions", json={"prompt": "Hi", "max_tokens": 2})
                assert r.status_code == 429 and r.headers["retry-after"] == "1"
                assert r.json()["error"]["type"] == "rate_limit_error"
                with OpenAI(base_url=live.base, api_key="x", max_retries=0) as client:
                    with pytest.raises(openai.RateLimitError):
                        client.completions.create(model="smollm2", prompt="Hi", max_tokens=2)
            # the queued client left before it ever got a slot: its request is gone
            assert wait_for(lambda: engine.snapshot().queued == 0)
            assert engine.snapshot().running == 1
    assert wait_for(lambda: engine.snapshot().running == 0)
    assert httpx.post(live.base + "/completions", json={"prompt": "Hi", "max_tokens": 2}).status_code == 200


def test_engine_failure_mid_stream_is_an_sse_error_event(make_served):
    live = make_served(parallel=1)
    body = {"prompt": "Count:", "stream": True, **LONG}
    with httpx.Client(base_url=live.url, timeout=60) as c:
        with c.stream("POST", "/v1/completions", json=body) as r:
            lines = r.iter_lines()
            assert next(lines).startswith("data: ")
            live.engine.close()  # the engine goes away under a running stream
            rest = [line for line in lines if line]
    assert rest[-2] == "event: error" and rest[-1].startswith("data: ")
    err = json.loads(rest[-1][len("data: "):])["error"]
    assert err["type"] == "server_error" and "shut down" in err["message"]
    assert "data: [DONE]" not in rest
    r = httpx.post(live.base + "/completions", json={"prompt": "Hi"})
    assert r.status_code == 503 and "retry-after" in r.headers
    # The openai client raises on the error event.
    live2 = make_served(parallel=1)
    with OpenAI(base_url=live2.base, api_key="x", max_retries=0) as client:
        stream = client.completions.create(model="smollm2", prompt="Count:", stream=True, max_tokens=2000,
                                           extra_body={"ignore_eos": True})
        with pytest.raises(openai.APIError, match="shut down"):
            for i, _ in enumerate(stream):
                if i == 1:
                    live2.engine.close()


def test_metrics_stats_and_health(served, client):
    client.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": "Hi"}], max_tokens=3)
    text = httpx.get(served.url + "/metrics").text
    for name in ("edge_infer_http_requests_total", "edge_infer_prompt_tokens_total",
                 "edge_infer_completion_tokens_total", "edge_infer_time_to_first_token_seconds_bucket",
                 "edge_infer_time_per_output_token_seconds_bucket", "edge_infer_queue_depth",
                 "edge_infer_slots_busy", "edge_infer_kv_cells_used", "edge_infer_rss_bytes",
                 "edge_infer_cancelled_requests_total"):
        assert name in text, name
    assert 'edge_infer_http_requests_total{endpoint="/v1/chat/completions",status="200"}' in text
    stats = httpx.get(served.base + "/stats").json()
    assert stats["model"] == "smollm2" and stats["n_slots"] == 4 and stats["generated_tokens_total"] > 0
    assert httpx.get(served.url + "/health").json()["status"] == "ok"
