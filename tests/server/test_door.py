"""The door (server.door): a web page cannot drive the local server. A foreign Host (DNS
rebinding) and a foreign Origin (a cross-site text/plain POST) are refused 403 in each face's
error format, the Origin before a byte of the body is read; loopback Hosts and origins, the
listed ones, clients without an Origin and the Unix socket pass."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import sys
import time

import anthropic
import httpx
import openai
import pytest

from tests.server.conftest import serve_logged, short_socket_path
from tests.server.test_errors import error_of

CHAT = {"model": "smollm2", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2, "temperature": 0}
EVIL = "http://evil.example"


@pytest.fixture(scope="module")
def proxied(make_served):
    """Behind a reverse proxy named proxy.example, a web UI at https://chat.example.com."""
    return make_served(app_kwargs={"allowed_hosts": ["proxy.example"], "cors_origins": ["https://chat.example.com/"]},
                       parallel=1, ctx=512)


def test_a_foreign_host_is_refused_in_each_faces_format(served):
    evil = {"Host": "evil.example:8080"}
    r = httpx.get(served.url + "/api/tags", headers=evil)
    assert r.status_code == 403 and set(r.json()) == {"error"} and "--allowed-host evil.example" in r.json()["error"]
    r = httpx.post(served.base + "/chat/completions", json=CHAT, headers=evil)
    err = error_of(r)
    assert r.status_code == 403 and err["code"] == "host_not_allowed" and err["type"] == "permission_error"
    assert "--allowed-host evil.example" in err["message"] and "\n" not in err["message"]
    with openai.OpenAI(base_url=served.base, api_key="x", max_retries=0, default_headers=evil) as c:
        with pytest.raises(openai.PermissionDeniedError, match="host_not_allowed|Host"):
            c.models.list()
    with anthropic.Anthropic(base_url=served.url, api_key="x", max_retries=0, default_headers=evil) as c:
        with pytest.raises(anthropic.PermissionDeniedError) as caught:
            c.messages.create(model="smollm2", max_tokens=2, messages=[{"role": "user", "content": "Hi"}])
    assert caught.value.body["type"] == "error" and caught.value.body["error"]["type"] == "permission_error"
    assert httpx.get(served.url + "/health", headers=evil).status_code == 403


@pytest.mark.parametrize("host", ["localhost", "localhost:1234", "127.0.0.1", "127.0.0.2:99", "[::1]", "[::1]:8080"])
def test_loopback_hosts_pass(served, host):
    r = httpx.get(served.url + "/api/tags", headers={"Host": host})
    assert r.status_code == 200 and r.json()["models"]


def test_the_address_served_on_passes_and_another_does_not():
    from edge_infer.server.door import Door

    async def ok(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    def status(host: bytes, server=("192.168.1.5", 8080), allowed=()) -> int:
        sent = []

        async def send(message):
            sent.append(message)

        async def receive():
            raise AssertionError("the door read the body")

        scope = {"type": "http", "method": "GET", "path": "/v1/models", "server": server,
                 "headers": [(b"host", host)]}
        asyncio.run(Door(ok, allowed_hosts=allowed)(scope, receive, send))
        return sent[0]["status"]

    assert status(b"192.168.1.5:8080") == 200
    assert status(b"192.168.1.6:8080") == 403
    assert status(b"[fe80::1]:8080", server=("fe80::1", 8080)) == 200
    assert status(b"10.0.0.1", server=("::ffff:10.0.0.1", 80)) == 200  # a dual-stack socket's address
    assert status(b"LLM.Example.COM.", allowed=["llm.example.com"]) == 200
    assert status(b"llm.example.com:443", allowed=["llm.example.com:8443"]) == 200  # any port
    assert status(b"localhost.evil.com") == 403
    assert status(b"evil.example", server=None) == 200   # the Unix socket: no server address


def test_allowed_host_and_star(proxied, make_served):
    assert httpx.get(proxied.base + "/models", headers={"Host": "proxy.example"}).status_code == 200
    assert httpx.get(proxied.base + "/models", headers={"Host": "proxy.example:443"}).status_code == 200
    assert httpx.get(proxied.base + "/models", headers={"Host": "other.example"}).status_code == 403
    anyone = make_served(app_kwargs={"allowed_hosts": ["*"]}, parallel=1, ctx=512)
    assert httpx.get(anyone.base + "/models", headers={"Host": "evil.example"}).status_code == 200


@pytest.mark.parametrize("path, face", [("/v1/chat/completions", "openai"), ("/api/chat", "ollama")])
def test_a_text_plain_post_from_a_foreign_origin_is_refused(served, path, face):
    r = httpx.post(served.url + path, content=b'{"model": "smollm2", "messages": [{"role": "user", "content": "Hi"}], '
                   b'"max_tokens": 2, "stream": false}', headers={"Origin": EVIL, "Content-Type": "text/plain"})
    assert r.status_code == 403, r.text
    if face == "ollama":
        assert "--cors-origin" in r.json()["error"]
    else:
        assert error_of(r)["code"] == "origin_not_allowed"
    assert "access-control-allow-origin" not in r.headers


@pytest.mark.parametrize("origin", [EVIL, "http://localhost.evil.com", "http://127.0.0.1.evil.com", "null",
                                    "file://", "http://localhost:3000/path", "ftp://localhost"])
def test_origins_that_are_not_loopback(served, origin):
    r = httpx.get(served.base + "/models", headers={"Origin": origin})
    assert r.status_code == 403 and error_of(r)["code"] == "origin_not_allowed"


def test_the_origin_is_refused_before_the_body_is_read(served):
    port = int(served.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n"
                  b"Origin: http://evil.example\r\nContent-Length: 1000000\r\n\r\n{")  # 999,999 bytes never come
        started = time.monotonic()
        reply = b""
        while chunk := s.recv(65536):  # the answer closes the connection; its head and body may
            reply += chunk             # come in two segments (one recv() read the head alone once)
    assert reply.startswith(b"HTTP/1.1 403") and b"origin_not_allowed" in reply, reply
    assert time.monotonic() - started < 5  # at once: not after the 30 s body timeout


@pytest.mark.parametrize("origin", ["http://localhost:5173", "http://127.0.0.1:3000", "http://[::1]:8000",
                                    "https://localhost"])
def test_loopback_origins_get_cors_answers(served, origin):
    pre = httpx.options(served.base + "/chat/completions", headers={
        "Origin": origin, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"})
    assert pre.status_code == 200 and pre.headers["access-control-allow-origin"] == origin
    r = httpx.post(served.base + "/chat/completions", json=CHAT, headers={"Origin": origin}, timeout=60)
    assert r.status_code == 200 and r.headers["access-control-allow-origin"] == origin


def test_a_listed_origin_passes(proxied):
    origin = "https://chat.example.com"  # listed with a trailing slash: the same origin
    pre = httpx.options(proxied.base + "/chat/completions", headers={
        "Origin": origin, "Access-Control-Request-Method": "POST", "Host": "proxy.example"})
    assert pre.status_code == 200 and pre.headers["access-control-allow-origin"] == origin
    r = httpx.post(proxied.base + "/chat/completions", json=CHAT, headers={"Origin": origin}, timeout=60)
    assert r.status_code == 200 and r.headers["access-control-allow-origin"] == origin
    assert httpx.get(proxied.base + "/models", headers={"Origin": "https://other.example.com"}).status_code == 403


def test_clients_without_an_origin_and_the_unix_socket_are_unaffected(served):
    assert httpx.post(served.base + "/chat/completions", json=CHAT, timeout=60).status_code == 200
    foreign = {"Host": "evil.example", "Origin": EVIL, "Content-Type": "text/plain"}
    with httpx.Client(transport=httpx.HTTPTransport(uds=served.socket), base_url="http://evil.example") as c:
        r = c.post("/v1/chat/completions", content=json.dumps(CHAT), headers=foreign, timeout=60)
    assert r.status_code == 200, r.text


def test_serve_with_the_flags(smollm2_path, tmp_path):
    """`edge-infer serve` as a process: --allowed-host, the models config's [server] table,
    --cors-origin and the defaults."""
    config = tmp_path / "models.toml"
    config.write_text('[server]\nallowed_hosts = ["llm.example.com"]\n')
    log = tmp_path / "serve.log"
    p = serve_logged(log, smollm2_path, "--port", "0", "--allowed-host", "proxy.example", "--cors-origin",
                     "https://chat.example.com", "--models-config", config, "--threads", "2", "--parallel", "1",
                     "--ctx", "512")
    try:
        url = re.search(r"http://127\.0\.0\.1:\d+/v1", log.read_text()).group(0)
        for host in ("proxy.example", "llm.example.com:443", "localhost"):
            assert httpx.get(url + "/models", headers={"Host": host}).status_code == 200, host
        r = httpx.get(url + "/models", headers={"Host": "evil.example"})
        assert r.status_code == 403 and "--allowed-host" in error_of(r)["message"]
        r = httpx.post(url + "/chat/completions", content=b"{}", headers={"Origin": EVIL, "Content-Type": "text/plain"})
        assert r.status_code == 403 and error_of(r)["code"] == "origin_not_allowed"
        ok = httpx.get(url + "/models", headers={"Origin": "https://chat.example.com"})
        assert ok.status_code == 200 and ok.headers["access-control-allow-origin"] == "https://chat.example.com"
    finally:
        p.terminate()
        p.communicate(timeout=30)


def test_a_bad_server_table_is_a_clear_error(smollm2_path, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[server]\nallowed_host = ["x"]\n')
    p = subprocess.run([sys.executable, "-m", "edge_infer", "serve", smollm2_path, "--socket", short_socket_path(),
                        "--models-config", bad], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "server.allowed_host" in p.stderr and "Traceback" not in p.stderr
