"""Bare routes (a base URL without /v1, as llama-server answers) and CORS for browser
clients: loopback origins only by default, exact preflight answers when an origin is allowed
(the door's Origin check: test_door)."""

from __future__ import annotations

import httpx
import pytest

from tests.server.test_errors import error_of

ORIGIN = "http://localhost:3000"


@pytest.fixture(scope="module")
def open_to_web(make_served):
    return make_served(app_kwargs={"cors_origins": [ORIGIN], "api_key": "k"}, parallel=2, ctx=512)


def test_every_v1_route_answers_without_v1_too(served):
    from openai import OpenAI

    assert [m["id"] for m in httpx.get(served.url + "/models").json()["data"]] == ["smollm2"]
    assert httpx.get(served.url + "/models/smollm2").json()["id"] == "smollm2"
    body = {"model": "smollm2", "max_tokens": 3, "temperature": 0}
    bare = httpx.post(served.url + "/completions", json={**body, "prompt": "Hello"}, timeout=60).json()
    v1 = httpx.post(served.base + "/completions", json={**body, "prompt": "Hello"}, timeout=60).json()
    assert bare["choices"][0]["text"] == v1["choices"][0]["text"]
    with OpenAI(base_url=served.url, api_key="unused", max_retries=0) as client:   # a bare base URL
        out = client.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": "Hi"}],
                                             max_tokens=3, temperature=0)
    assert out.choices[0].message.content
    assert httpx.get(served.url + "/stats").status_code == 200
    missing = httpx.get(served.url + "/v2/models")
    assert missing.status_code == 404 and error_of(missing)["message"].startswith("GET /v2/models")


def test_cors_is_for_loopback_origins_by_default(served):
    r = httpx.options(served.base + "/chat/completions",
                      headers={"Origin": ORIGIN, "Access-Control-Request-Method": "POST"})
    assert r.headers["access-control-allow-origin"] == ORIGIN
    other = "https://chat.example.com"
    r = httpx.options(served.base + "/chat/completions",
                      headers={"Origin": other, "Access-Control-Request-Method": "POST"})
    assert r.status_code == 403 and "access-control-allow-origin" not in r.headers
    assert "access-control-allow-origin" not in httpx.get(served.base + "/models", headers={"Origin": other}).headers


def test_an_allowed_origin_gets_preflights_and_headers_before_auth(open_to_web):
    pre = httpx.options(open_to_web.base + "/chat/completions", headers={
        "Origin": ORIGIN, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type"})
    assert pre.status_code == 200                                  # no key needed for a preflight
    assert pre.headers["access-control-allow-origin"] == ORIGIN
    assert "POST" in pre.headers["access-control-allow-methods"]
    assert set(pre.headers["access-control-allow-headers"].lower().replace(" ", "").split(",")) >= {
        "authorization", "content-type"}
    assert pre.headers["access-control-max-age"] == "600"
    call = httpx.post(open_to_web.url + "/chat/completions", timeout=60, headers={
        "Origin": ORIGIN, "Authorization": "Bearer k"},
        json={"model": "smollm2", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2})
    assert call.status_code == 200 and call.headers["access-control-allow-origin"] == ORIGIN
    refused = httpx.get(open_to_web.base + "/models", headers={"Origin": ORIGIN})
    assert refused.status_code == 401 and refused.headers["access-control-allow-origin"] == ORIGIN


def test_another_origin_is_refused(open_to_web):
    pre = httpx.options(open_to_web.base + "/chat/completions", headers={
        "Origin": "http://evil.example", "Access-Control-Request-Method": "POST"})
    assert pre.status_code == 403 and "access-control-allow-origin" not in pre.headers
    r = httpx.get(open_to_web.url + "/health", headers={"Origin": "http://evil.example"})
    assert r.status_code == 403 and "access-control-allow-origin" not in r.headers
