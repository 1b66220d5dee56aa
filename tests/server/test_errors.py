"""Errors in OpenAI's shape, with the status codes the openai client maps to its types."""

from __future__ import annotations

import httpx
import openai
import pytest
from openai import OpenAI

Q = [{"role": "user", "content": "Hi"}]


def error_of(r: httpx.Response) -> dict:
    body = r.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]


@pytest.mark.parametrize("body,param", [
    ({"messages": []}, "messages"),
    ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
    ({"messages": Q, "temperature": 3}, "temperature"),
    ({"messages": Q, "max_tokens": 0}, "max_tokens"),
    ({"messages": Q, "n": "two"}, "n"),
    ({"messages": Q, "stop": ["a", "b", "c", "d", "e"]}, "stop"),
    ({"messages": Q, "top_logprobs": 3}, "top_logprobs"),
    ({"messages": Q, "response_format": {"type": "xml"}}, "response_format.type"),
    ({"messages": Q, "tools": [{"type": "function", "function": {"name": "no spaces"}}]}, "tools[0].function.name"),
    ({"messages": Q, "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": {
        "type": "function", "function": {"name": "g"}}}, "tool_choice.function.name"),
    ({}, "messages"),
])
def test_bad_fields_name_their_param(served, body, param):
    r = httpx.post(served.base + "/chat/completions", json=body)
    assert r.status_code == 400
    err = error_of(r)
    assert err["param"] == param and err["type"] == "invalid_request_error"


def test_bad_json(served):
    for raw in (b"{not json", b"[1, 2]", b"\xff\xfe"):
        r = httpx.post(served.base + "/completions", content=raw, headers={"Content-Type": "application/json"})
        assert r.status_code == 400 and "JSON" in error_of(r)["message"]


def test_openai_client_maps_errors(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="smollm2", messages=Q, temperature=-1)
    assert e.value.param == "temperature"
    with pytest.raises(openai.NotFoundError) as e:
        client.chat.completions.create(model="gpt-4o", messages=Q)
    assert e.value.code == "model_not_found" and "gpt-4o" in e.value.message
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-4o")


def test_context_overflow_states_both_lengths(client, served):
    long = [{"role": "user", "content": "word " * 1500}]
    n = len(served.engine.tokenize_messages(long))
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="smollm2", messages=long)
    assert e.value.code == "context_length_exceeded" and e.value.param == "messages"
    assert str(n) in e.value.message and "1024" in e.value.message
    with pytest.raises(openai.BadRequestError, match="1024"):
        client.completions.create(model="smollm2", prompt="word " * 1500)


def test_body_too_large(make_served):
    live = make_served({"max_body": 1000}, parallel=1)
    big = {"messages": [{"role": "user", "content": "x" * 2000}]}
    r = httpx.post(live.base + "/chat/completions", json=big)
    assert r.status_code == 413 and error_of(r)["code"] == "request_too_large"

    def chunks():  # no Content-Length: counted while reading
        yield b'{"prompt": "'
        for _ in range(20):
            yield b"x" * 100
        yield b'"}'
    r = httpx.post(live.base + "/completions", content=chunks())
    assert r.status_code == 413


def test_api_key_required_when_set(make_served):
    live = make_served({"api_key": "s3cret"}, parallel=1)
    assert httpx.get(live.url + "/health").status_code == 200  # liveness stays open
    with OpenAI(base_url=live.base, api_key="wrong", max_retries=0) as bad:
        with pytest.raises(openai.AuthenticationError) as e:
            bad.chat.completions.create(model="smollm2", messages=Q, max_tokens=2)
        assert e.value.code == "invalid_api_key"
    r = httpx.get(live.base + "/models")
    assert r.status_code == 401 and error_of(r)["code"] == "missing_api_key"
    assert r.headers["www-authenticate"] == "Bearer"
    for path in ("/v1/stats", "/metrics"):
        assert httpx.get(live.url + path).status_code == 401
    with OpenAI(base_url=live.base, api_key="s3cret", max_retries=0) as good:
        assert good.chat.completions.create(model="smollm2", messages=Q, max_tokens=2).choices
        assert httpx.get(live.url + "/metrics", headers={"Authorization": "Bearer s3cret"}).status_code == 200


def test_unknown_route_and_method(served):
    assert error_of(httpx.get(served.base + "/nope"))["message"]
    assert httpx.get(served.base + "/chat/completions").status_code == 405


@pytest.mark.parametrize("grammar, reason", [
    ('root ::= "a"{5,2}', "minimum above its maximum"),          # froze the server, RSS to 4 GB
    ('root ::= [^\\x00-\\U0010FFFF]', "matches no character"),   # aborted the process in llama.cpp
    ("root ::= item\nitem ::= undefined-rule", "undefined"),
    ("root ::= root \"a\"", "left"),
    ('root ::= "a"{1,100000}', "repetition"),
    ('root ::= "a"{60}{60}', "repeats a repetition"),            # segfaulted llama.cpp
    ('root ::= ("a"?){0,1000}', "can match the empty string"),  # one token took over 60 s
])
@pytest.mark.parametrize("route", ["/completions", "/chat/completions"])
def test_bad_grammars_are_400_and_the_server_serves_on(served, grammar, reason, route):
    body = {"grammar": grammar, "max_tokens": 4,
            **({"prompt": "Hi"} if route == "/completions" else {"messages": Q})}
    r = httpx.post(served.base + route, json=body, timeout=10)
    assert r.status_code == 400, r.text
    err = error_of(r)
    assert err["param"] == "grammar" and reason in err["message"].lower()
    ok = httpx.post(served.base + "/completions", json={"prompt": "Hi", "max_tokens": 2}, timeout=30)
    assert ok.status_code == 200 and httpx.get(served.url + "/health").status_code == 200


@pytest.mark.parametrize("raw, param", [
    (b'{"prompt": "Hi", "temperature": NaN}', "temperature"),
    (b'{"prompt": "Hi", "top_p": Infinity}', "top_p"),
    (b'{"prompt": "Hi", "repeat_penalty": Infinity}', "repeat_penalty"),
    (b'{"prompt": "Hi", "min_p": -Infinity}', "min_p"),
])
def test_nan_and_infinity_are_refused(served, raw, param):
    r = httpx.post(served.base + "/completions", content=raw, headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and error_of(r)["param"] == param, r.text


def test_a_huge_stop_string_is_refused(served):
    r = httpx.post(served.base + "/completions", json={"prompt": "Hi", "stop": ["x" * 10_000]})
    assert r.status_code == 400 and error_of(r)["param"].startswith("stop"), r.text


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the crash is the point
def test_a_dead_engine_thread_is_503_not_a_hang(make_served):
    """If the engine thread dies, /health says so and requests are refused, never left waiting."""
    live = make_served()
    engine = live.engine
    stream = httpx.stream("POST", live.base + "/completions", timeout=30,
                          json={"prompt": "Once upon a time", "max_tokens": 400, "ignore_eos": True, "stream": True})
    response = stream.__enter__()
    assert response.status_code == 200

    def crash(block):
        raise SystemExit("simulated engine crash")
    engine._take_inbox = crash
    engine.inbox.wake()
    engine._thread.join(10)
    assert not engine._thread.is_alive()
    body = b"".join(response.iter_bytes())   # the running stream ends instead of hanging
    stream.__exit__(None, None, None)
    assert b"engine stopped" in body or b"[DONE]" in body
    health = httpx.get(live.url + "/health", timeout=5)
    assert health.status_code == 503 and health.json()["status"] == "error"
    r = httpx.post(live.base + "/completions", json={"prompt": "Hi", "max_tokens": 2}, timeout=10)
    assert r.status_code == 503 and "engine thread has stopped" in error_of(r)["message"]


def test_a_request_past_its_deadline_ends_and_frees_its_slot(make_served):
    live = make_served(request_timeout=1, parallel=1)
    r = httpx.post(live.base + "/completions", timeout=30,
                   json={"prompt": "Once upon a time", "max_tokens": 900, "ignore_eos": True})
    assert r.status_code == 503 and error_of(r)["code"] == "deadline_exceeded", r.text
    assert r.headers["Retry-After"] == "1"
    with httpx.stream("POST", live.base + "/completions", timeout=30,
                      json={"prompt": "Once upon a time", "max_tokens": 900, "ignore_eos": True,
                            "stream": True}) as s:
        body = b"".join(s.iter_bytes())
    assert b"deadline" in body
    snap = live.engine.snapshot()
    assert snap.slots_busy == 0 and snap.running == 0
    ok = httpx.post(live.base + "/completions", json={"prompt": "Hi", "max_tokens": 2}, timeout=30)
    assert ok.status_code == 200
