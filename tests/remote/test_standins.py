"""Remote models against stand-in servers: forwarding, failover and recovery, dropped and
slow streams, metrics and health."""

from __future__ import annotations

import json
import time

import httpx
import openai
import pytest

from tests.remote.conftest import free_port
from tests.remote.standin import REPLY


def client(front) -> openai.OpenAI:
    return openai.OpenAI(base_url=front.url + "/v1", api_key="front-key", max_retries=0)


def ask(front, stream=False, **kw):
    return client(front).chat.completions.create(model="big", messages=[{"role": "user", "content": "hi"}],
                                                 stream=stream, **kw)


def wait_for(condition, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def metric(front, name: str, url: str) -> float:
    for line in httpx.get(front.url + "/metrics", headers={"Authorization": "Bearer front-key"}).text.splitlines():
        if line.startswith(name + "{") and f'url="{url}"' in line:
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} for {url} not in /metrics")


def test_requests_go_to_the_remote_with_its_name_and_key(front, standin, monkeypatch):
    remote = standin()
    monkeypatch.setenv("BIG_KEY", "remote-secret")
    f = front({"big": {"remote": [remote.url], "remote_model": "upstream-name", "api_key_env": "BIG_KEY"}},
              api_key="front-key")
    whole = ask(f, temperature=0)
    assert whole.choices[0].message.content == REPLY and whole.usage.total_tokens == 12  # the remote's usage
    body, headers = remote.received[-1]
    assert body["model"] == "upstream-name" and body["temperature"] == 0
    assert headers["authorization"] == "Bearer remote-secret"  # its key, never the front's
    streamed = "".join(c.choices[0].delta.content or "" for c in ask(f, stream=True) if c.choices)
    assert streamed == REPLY
    # Listed beside local models, in OpenAI's and Ollama's listings.
    ids = [m.id for m in client(f).models.list()]
    assert ids == ["big"]
    tags = httpx.get(f.url + "/api/tags", headers={"Authorization": "Bearer front-key"}).json()["models"]
    assert tags[0]["name"] == "big" and tags[0]["remote_model"] == "upstream-name"
    # An Ollama request for it goes to the remote's own Ollama route.
    r = httpx.post(f.url + "/api/chat", headers={"Authorization": "Bearer front-key"},
                   json={"model": "big", "messages": [{"role": "user", "content": "hi"}], "stream": False})
    assert r.json()["message"]["content"] == REPLY
    # The front's key is still required.
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=f.url + "/v1", api_key="wrong", max_retries=0).chat.completions.create(
            model="big", messages=[{"role": "user", "content": "hi"}])


def test_an_unreachable_remote_is_taken_out_and_back_once_it_answers(front, standin):
    port = free_port()
    good = standin()
    f = front({"big": {"remote": [f"http://127.0.0.1:{port}/v1", good.url], "health_interval": 0.3}})
    dead = f"http://127.0.0.1:{port}/v1"
    for _ in range(4):  # every request answered: the dead one is skipped
        assert ask(f).choices[0].message.content == REPLY
    assert metric(f, "edge_infer_remote_up", dead) == 0
    health = httpx.get(f.url + "/health").json()
    assert health["remotes"]["big"] == {"healthy": 1, "upstreams": 2, "status": "ok"}

    back = standin(port=port)  # it comes back: a health check puts it in again
    wait_for(lambda: metric(f, "edge_infer_remote_up", dead) == 1)
    for _ in range(6):
        ask(f)
    assert len(back.received) >= 2 and len(good.received) >= 6  # least outstanding, ties in turn
    assert metric(f, "edge_infer_remote_requests_total", back.url) >= 2


def test_every_remote_down_is_a_503_that_names_them(front):
    port = free_port()
    f = front({"big": {"remote": [f"http://127.0.0.1:{port}/v1"]}})
    with pytest.raises(openai.APIStatusError) as err:
        ask(f)
    assert err.value.status_code == 503 and f"127.0.0.1:{port}" in err.value.message
    assert httpx.get(f.url + "/health").json()["remotes"]["big"]["status"] == "degraded"


def test_a_refusing_remote_hands_the_request_to_the_next(front, standin):
    busy, good = standin(), standin()
    busy.mode = "refuse"
    f = front({"big": {"remote": [busy.url, good.url], "health_interval": 60}})
    for _ in range(3):
        assert ask(f).choices[0].message.content == REPLY
    assert len(good.received) == 3


def test_a_stream_dropped_half_way_ends_with_an_error_event(front, standin):
    remote = standin()
    remote.mode = "drop"
    f = front({"big": {"remote": [remote.url], "health_interval": 0.3}})
    got = []
    with pytest.raises(openai.APIError) as err:
        for c in ask(f, stream=True):
            got.append(c.choices[0].delta.content if c.choices else None)
    assert "Hello" in got and "dropped the stream" in str(err.value)
    assert httpx.get(f.url + "/health").json()["remotes"]["big"]["status"] == "degraded"
    assert metric(f, "edge_infer_remote_errors_total", remote.url) == 1
    remote.mode = "ok"  # it answers again: a health check puts it back
    wait_for(lambda: httpx.get(f.url + "/health").json()["remotes"]["big"]["status"] == "ok")
    assert ask(f).choices[0].message.content == REPLY


def test_a_slow_remote_is_cut_off_at_the_models_timeout(front, standin):
    remote = standin()
    remote.mode = "slow"
    f = front({"big": {"remote": [remote.url], "timeout": 1, "health_interval": 60}})
    t0 = time.monotonic()
    with pytest.raises(openai.APIStatusError) as err:
        ask(f)
    assert err.value.status_code == 504 and time.monotonic() - t0 < 5
    t0 = time.monotonic()
    lines = httpx.post(f.url + "/v1/chat/completions", timeout=10,
                       json={"model": "big", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
                       ).text.strip().split("\n\n")
    assert time.monotonic() - t0 < 5
    assert lines[-2] == "event: error" or lines[-1].startswith("event: error")
    assert "no end of the stream within 1 s" in json.loads(lines[-1].split("data: ", 1)[1])["error"]["message"]
