"""Over the Unix socket (openai client through an httpx transport, plain httpx, curl), and
the socket's life: mode 0600, a stale file replaced, a live one refused, removed on exit."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from edge_infer.server.launch import BindError, bind_unix, check_exposure, is_loopback, remove_unix
from tests.server.conftest import short_socket_path

HELLO = [{"role": "user", "content": "Say hello."}]


def test_openai_client_over_the_socket(served):
    import openai
    from openai import OpenAI

    # openai >= 3 is built on httpx2, older releases on httpx: use whichever it is.
    lib = importlib.import_module(openai.DefaultHttpxClient.__mro__[1].__module__.split(".")[0])
    http = lib.Client(transport=lib.HTTPTransport(uds=served.socket))
    with OpenAI(base_url="http://localhost/v1", api_key="unused", http_client=http, max_retries=0) as client:
        r = client.chat.completions.create(model="smollm2", messages=HELLO, max_tokens=8, temperature=0)
        assert r.choices[0].message.content and r.usage.completion_tokens > 0
        chunks = list(client.chat.completions.create(model="smollm2", messages=HELLO, max_tokens=8, stream=True,
                                                     stream_options={"include_usage": True}))
        assert chunks[-1].usage.completion_tokens > 0


def test_plain_httpx_over_the_socket(served):
    import httpx

    with httpx.Client(transport=httpx.HTTPTransport(uds=served.socket), base_url="http://localhost") as c:
        assert c.get("/health").json()["status"] == "ok"
        body = {"messages": HELLO, "max_tokens": 4, "stream": True}
        with c.stream("POST", "/v1/chat/completions", json=body) as r:
            assert r.headers["content-type"].startswith("text/event-stream")
            lines = [line for line in r.iter_lines() if line]
        assert lines[-1] == "data: [DONE]"
        assert json.loads(lines[0][len("data: "):])["choices"][0]["delta"]["role"] == "assistant"


@pytest.mark.skipif(not shutil.which("curl"), reason="curl is not installed")
def test_curl_over_the_socket(served):
    body = json.dumps({"model": "smollm2", "messages": HELLO, "max_tokens": 6, "temperature": 0})
    r = subprocess.run(["curl", "-sS", "--unix-socket", served.socket, "http://localhost/v1/chat/completions",
                        "-H", "Content-Type: application/json", "-d", body], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["choices"][0]["message"]["content"]
    r = subprocess.run(["curl", "-sSN", "--unix-socket", served.socket, "http://localhost/v1/completions",
                        "-d", json.dumps({"prompt": "Hi", "max_tokens": 3, "stream": True})],
                       capture_output=True, text=True, timeout=60)
    assert r.stdout.rstrip().endswith("data: [DONE]")


def test_socket_is_private(served):
    assert stat.S_IMODE(os.stat(served.socket).st_mode) == 0o600


def test_stale_socket_is_replaced_live_one_refused_file_kept():
    path = short_socket_path()
    dead = socket.socket(socket.AF_UNIX)
    dead.bind(path)
    dead.close()  # the file stays behind, as after a crash
    live = bind_unix(path)
    try:
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        with pytest.raises(BindError, match="already listening"):
            bind_unix(path)
    finally:
        live.close()
        remove_unix(path)
    assert not Path(path).exists()
    Path(path).write_text("not a socket")
    with pytest.raises(BindError, match="not a socket"):
        bind_unix(path)
    assert Path(path).read_text() == "not a socket"


def test_only_loopback_without_a_key():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    check_exposure("127.0.0.1", None)
    for host in ("0.0.0.0", "192.168.1.10", "::", "example.com"):
        with pytest.raises(BindError, match="without an API key"):
            check_exposure(host, None)
        check_exposure(host, "secret")


def edge_infer(*args, **kw):
    return subprocess.Popen([sys.executable, "-m", "edge_infer", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def test_serve_refuses_public_host_without_key(smollm2_path):
    p = edge_infer("serve", smollm2_path, "--host", "0.0.0.0", "--port", "0")
    _, err = p.communicate(timeout=60)
    assert p.returncode == 2 and "without an API key" in err


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serve_cli_on_a_socket_removes_it_on_exit(smollm2_path, sig):
    import httpx

    path = short_socket_path()
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(path)
    stale.close()
    p = edge_infer("serve", smollm2_path, "--socket", path, "--parallel", "2", "--ctx", "512", "--threads", "2")
    try:
        with httpx.Client(transport=httpx.HTTPTransport(uds=path), base_url="http://localhost", timeout=120) as c:
            for _ in range(600):
                try:
                    if c.get("/health").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert p.poll() is None, p.stderr.read()
                time.sleep(0.1)
            assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
            r = c.post("/v1/completions", json={"prompt": "Hello", "max_tokens": 3})
            assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] > 0
        p.send_signal(sig)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert "serving" in err and f"unix:{path}" in err
    assert not Path(path).exists()
    Path(path).parent.rmdir()


def test_a_socket_in_a_new_folder_gets_a_private_folder():
    base = Path(short_socket_path()).parent
    path = base / "run" / "ei.sock"
    sock = bind_unix(path)
    try:
        assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    finally:
        sock.close()
        remove_unix(path)
        path.parent.rmdir()
        base.rmdir()
