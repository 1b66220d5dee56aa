"""Bad input that used to reach llama.cpp, slow clients, a stalled engine: each gets a clear
answer, and the server goes on serving."""

from __future__ import annotations

import socket
import threading
import time

import httpx
import pytest

from tests.server.test_errors import error_of

Q = [{"role": "user", "content": "Hi"}]


def serves_on(live) -> None:
    ok = httpx.post(live.base + "/completions", json={"prompt": "Hi", "max_tokens": 2}, timeout=30)
    assert ok.status_code == 200 and httpx.get(live.url + "/health").status_code == 200


@pytest.mark.parametrize("grammar, reason", [
    ("root ::= <[100000]>", "outside the vocabulary"),    # aborted the process (no token allowed)
    ('root ::= <[0]> "a"', "ends generation"),             # an EOS token required: same abort
    ('root ::= <|im_end|> "x"', "ends generation"),
    ("root ::= <not one token>", "not a single token"),
])
def test_grammars_with_impossible_tokens_are_400(served, grammar, reason):
    r = httpx.post(served.base + "/completions", json={"prompt": "Hi", "grammar": grammar, "max_tokens": 4})
    assert r.status_code == 400, r.text
    err = error_of(r)
    assert err["param"] == "grammar" and reason in err["message"], err
    serves_on(served)


def test_a_negated_token_grammar_still_works(served):
    r = httpx.post(served.base + "/completions",
                   json={"prompt": "Hi", "grammar": "root ::= !<[0]> !<[0]>", "max_tokens": 4, "temperature": 0})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("bias, needle", [
    ({"abc": 5}, "token ids as strings"),
    ({"-1": 5}, "token ids as strings"),
    ({"10": 101}, "from -100 to 100"),
    ({"10": "x"}, "valid number"),
    ({"99999999": 1}, "outside the vocabulary"),
    ({str(i): 1 for i in range(1025)}, "at most 1024"),
])
def test_bad_logit_bias_is_400(served, bias, needle):
    r = httpx.post(served.base + "/completions", json={"prompt": "Hi", "logit_bias": bias, "max_tokens": 2})
    assert r.status_code == 400, r.text
    err = error_of(r)
    assert err["param"].startswith("logit_bias") and needle in err["message"], err


def test_logit_bias_steers_the_output(served):
    """+100 on one token makes greedy decoding pick it every time."""
    token = 28  # a plain word piece in SmolLM2's vocabulary
    r = httpx.post(served.base + "/completions", timeout=30,
                   json={"prompt": [1, 2, 3], "logit_bias": {str(token): 100}, "max_tokens": 3,
                         "temperature": 0, "logprobs": 0})
    assert r.status_code == 200, r.text
    plain = httpx.post(served.base + "/completions", timeout=30,
                       json={"prompt": [1, 2, 3], "max_tokens": 3, "temperature": 0}).json()
    biased = r.json()["choices"][0]["logprobs"]["tokens"]
    assert len(biased) == 3 and len(set(biased)) == 1, biased
    assert r.json()["choices"][0]["text"] != plain["choices"][0]["text"]


@pytest.mark.parametrize("field, value", [
    ("top_k", 2**40), ("seed", 2**70), ("seed", -(2**70)), ("n", 10**6), ("max_tokens", -5),
    ("logprobs", 10**9), ("prompt", [10**12]), ("prompt", [-1]),
])
def test_out_of_range_numbers_are_400(served, field, value):
    body = {"prompt": "Hi", "max_tokens": 2, field: value}
    r = httpx.post(served.base + "/completions", json=body, timeout=10)
    assert r.status_code == 400, r.text
    assert error_of(r)["param"].startswith(field)


def test_a_body_that_trickles_in_gets_408(make_served):
    live = make_served(app_kwargs={"body_timeout": 1}, parallel=1)
    port = int(live.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 1000\r\n\r\n{\"prompt\": ")
        reply = b""
        while chunk := s.recv(4096):  # the server answers and closes, well before this timeout
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 408") and b"did not arrive" in reply, reply
    serves_on(live)


def test_half_sent_headers_are_dropped(served, monkeypatch):
    from edge_infer.server.http_limits import HeaderTimeoutH11Protocol

    monkeypatch.setattr(HeaderTimeoutH11Protocol, "header_timeout", 1.0)  # 10 s when serving
    port = int(served.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Slow: ")  # and nothing more
        started = time.monotonic()
        assert s.recv(4096) == b""  # closed by the server, not by this socket's timeout
        assert time.monotonic() - started < 30
    serves_on(served)


@pytest.mark.parametrize("headers", [{"X-Big": "a" * 64 * 1024}, {f"X-H{i}": "v" for i in range(200)}])
def test_huge_headers_are_refused(served, headers):
    r = httpx.get(served.url + "/health", headers=headers)
    assert r.status_code == 431 and error_of(r)["code"] == "headers_too_large"
    serves_on(served)


def test_a_stalled_engine_answers_503_and_health_says_so(make_served):
    live = make_served(parallel=1, stall_timeout=1)
    engine = live.engine
    real_decode, release = engine.ctx.decode, threading.Event()

    def stuck_decode(batch):
        release.wait(30)
        return real_decode(batch)

    engine.ctx.decode = stuck_decode
    try:
        r = httpx.post(live.base + "/completions", json={"prompt": "Hi", "max_tokens": 4}, timeout=20)
        assert r.status_code == 503 and "no progress" in error_of(r)["message"], r.text
        assert r.headers["Retry-After"]
        health = httpx.get(live.url + "/health", timeout=5)
        assert health.status_code == 503 and health.json()["status"] == "stalled"
        again = httpx.post(live.base + "/completions", json={"prompt": "Hi", "max_tokens": 4}, timeout=20)
        assert again.status_code == 503 and "stalled" in error_of(again)["message"]
    finally:
        engine.ctx.decode = real_decode
        release.set()
    for _ in range(100):
        if httpx.get(live.url + "/health", timeout=5).status_code == 200:
            break
        time.sleep(0.1)
    serves_on(live)


def test_an_unknown_model_name_is_not_echoed_whole(served):
    r = httpx.post(served.base + "/completions", json={"model": "m" * 1_000_000, "prompt": "Hi"}, timeout=30)
    assert r.status_code == 404 and error_of(r)["code"] == "model_not_found"
    assert len(r.content) < 1024 and "mmmm" in error_of(r)["message"]
    serves_on(served)
