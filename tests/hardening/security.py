"""Section `security`: model names that look like paths, API key checks, CORS off by
default, body size limit, and the Unix socket's file mode. One pass/fail row per check."""

from __future__ import annotations

import asyncio
import os
import stat

import httpx

from .common import Section, Target, chat_body

TRAVERSAL_MODELS = ["../../etc/passwd", "/etc/passwd", "..\\..\\windows\\win.ini", "file:///etc/passwd",
                    "%2e%2e%2f%2e%2e%2fetc%2fpasswd", "~/.ssh/id_rsa", "models/../../../etc/passwd"]
TRAVERSAL_PATHS = ["/v1/models/..%2f..%2fetc%2fpasswd", "/v1/models/%2e%2e%2f%2e%2e%2fetc%2fpasswd",
                   "/v1/models/..%5c..%5cetc%5cpasswd"]
PROTECTED = [("GET", "/v1/models"), ("GET", "/metrics"), ("GET", "/v1/stats"), ("GET", "/props"),
             ("POST", "/v1/chat/completions"), ("POST", "/v1/completions")]


def run_security(url: str, *, target: Target | None = None) -> dict:
    target = target or Target(url)
    return asyncio.run(_security(target))


async def _security(target: Target) -> dict:
    sec = Section("security")
    async with target.client(timeout=60) as client, target.client(timeout=60, auth=False) as bare:
        await _traversal(sec, client, target)
        await _body_limit(sec, client)
        if target.api_key:
            await _auth(sec, bare, target)
        else:
            r = await bare.get("/v1/models")
            sec.add("API key checks", f"skipped (no --api-key; /v1/models without a key: {r.status_code})")
        await _cors(sec, client)
    if target.unix:
        _socket_mode(sec, target.unix)
    return sec.done()


def check(sec: Section, name: str, ok: bool, detail: str = "", target: str = "pass") -> None:
    sec.add(name, ("pass" if ok else "FAIL") + (f" ({detail})" if detail else ""), target, ok)


def _is_model_not_found(r: httpx.Response) -> bool:
    try:
        return r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"
    except (ValueError, KeyError, TypeError):
        return False


async def _traversal(sec: Section, client, target: Target) -> None:
    bad = []
    for model in TRAVERSAL_MODELS:
        for path in ("/v1/chat/completions", "/v1/completions"):
            body = chat_body("hi", 1) if "chat" in path else {"prompt": "hi", "max_tokens": 1}
            r = await client.post(path, json={**body, "model": model})
            if not _is_model_not_found(r) or "root:" in r.text:
                bad.append(f"{path} model={model!r}: {r.status_code} {r.text[:120]}")
    for b in bad:
        sec.example("path traversal in model name", b)
    check(sec, "model name as a path -> 404 model_not_found", not bad,
          f"{len(TRAVERSAL_MODELS) * 2} tried" + (f", {len(bad)} wrong" if bad else ""))

    bad = []
    for path in TRAVERSAL_PATHS:
        r = await client.get(path)
        if r.status_code != 404 or "root:" in r.text:
            bad.append(f"GET {path}: {r.status_code} {r.text[:120]}")
    # httpx removes dot segments; a raw request sends them as they are.
    status, text = await _raw_get(target, "/v1/models/../../etc/passwd")
    if status not in (404, 400) or "root:" in text:
        bad.append(f"raw GET /v1/models/../../etc/passwd: {status} {text[:120]}")
    for b in bad:
        sec.example("path traversal in URL", b)
    check(sec, "GET /v1/models/<traversal> -> 404", not bad, f"{len(TRAVERSAL_PATHS) + 1} tried")


async def _raw_get(target: Target, path: str, auth: str | None = None) -> tuple[int | None, str]:
    """GET sent byte for byte; auth None = the probe's own key, "" = no header."""
    if auth is None:
        auth = f"Bearer {target.api_key}" if target.api_key else ""
    reader, writer = await target.open_raw()
    try:
        line = f"Authorization: {auth}\r\n" if auth else ""
        writer.write(f"GET {path} HTTP/1.1\r\nHost: {target.host_header}\r\n{line}Connection: close\r\n\r\n"
                     .encode())
        await writer.drain()
        data = await asyncio.wait_for(reader.read(65536), 30)
    finally:
        writer.close()
    text = data.decode("utf-8", "replace")
    try:
        return int(text.split(" ", 2)[1]), text
    except (IndexError, ValueError):
        return None, text


async def _body_limit(sec: Section, client) -> None:
    big = b'{"prompt": "' + b"a" * (9 << 20) + b'", "max_tokens": 1}'
    r1 = await client.post("/v1/completions", content=big, headers={"content-type": "application/json"})

    async def chunks():  # no Content-Length: the server has to count as it reads
        for k in range(0, len(big), 1 << 20):
            yield big[k:k + (1 << 20)]
    try:
        r2 = (await client.post("/v1/completions", content=chunks(),
                                headers={"content-type": "application/json"})).status_code
    except httpx.HTTPError as exc:  # closing the connection after the 413 is fine too
        r2 = type(exc).__name__
    check(sec, "9 MiB body -> 413", r1.status_code == 413 and r2 in (413, "RemoteProtocolError", "WriteError"),
          f"with Content-Length: {r1.status_code}, chunked: {r2}")


async def _auth(sec: Section, bare, target: Target) -> None:
    key = target.api_key
    wrong_same = ("x" if key[0] != "x" else "y") + key[1:]
    wrong_len = key + "x"
    cases = {"no Authorization header": {}, "wrong key, same length": {"Authorization": f"Bearer {wrong_same}"},
             "wrong key, other length": {"Authorization": f"Bearer {wrong_len}"},
             "bearer without key": {"Authorization": "Bearer"}, "Basic scheme": {"Authorization": f"Basic {key}"},
             "key without scheme": {"Authorization": key}}
    echoed = []
    for name, headers in cases.items():
        r = await bare.get("/v1/models", headers=headers)
        check(sec, f"auth: {name} -> 401", r.status_code == 401, f"got {r.status_code}")
        echoed += [name for s in (key, wrong_same, wrong_len) if _leaks(r, s)]
    # httpx will not send a header value ending in a space; a raw request will.
    status, text = await _raw_get(target, "/v1/models", auth="Bearer ")
    check(sec, "auth: 'Bearer ' (empty key) -> 401", status == 401, f"got {status}")
    echoed += ["empty bearer"] if key in text else []
    r = await bare.get("/v1/models", headers={"Authorization": f"Bearer {key}"})
    check(sec, "auth: right key -> 200", r.status_code == 200, f"got {r.status_code}")
    echoed += ["right key"] if _leaks(r, key) else []
    check(sec, "auth: key not echoed in headers/body", not echoed, ", ".join(echoed))
    open_ = []
    for method, path in PROTECTED:
        r = await bare.request(method, path, json=chat_body("hi", 1) if method == "POST" else None)
        if r.status_code != 401:
            open_.append(f"{method} {path}: {r.status_code}")
    check(sec, "auth: every API route needs the key", not open_, "; ".join(open_))
    r = await bare.get("/health")
    sec.add("/health without a key", r.status_code)


def _leaks(r: httpx.Response, secret: str) -> bool:
    return any(secret in v for v in r.headers.values()) or secret in r.text


async def _cors(sec: Section, client) -> None:
    origin = "http://evil.example"
    pre = await client.options("/v1/chat/completions", headers={
        "Origin": origin, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type"})
    get = await client.get("/v1/models", headers={"Origin": origin})
    post = await client.post("/v1/chat/completions", json=chat_body("hi", 1), headers={"Origin": origin})
    for name, r in (("preflight OPTIONS", pre), ("GET with Origin", get), ("POST with Origin", post)):
        acao = r.headers.get("access-control-allow-origin")
        check(sec, f"CORS: {name} has no Access-Control-Allow-Origin", acao is None,
              f"status {r.status_code}" + (f", ACAO {acao!r}" if acao else ""))


def _socket_mode(sec: Section, path: str) -> None:
    st = os.stat(path)
    mode = stat.S_IMODE(st.st_mode)
    check(sec, "unix socket mode 0600", mode == 0o600, oct(mode))
    parent = os.path.dirname(os.path.abspath(path))
    pmode = stat.S_IMODE(os.stat(parent).st_mode)
    # World-writable without the sticky bit would let anyone replace the socket.
    risky = bool(pmode & 0o002) and not pmode & stat.S_ISVTX
    sec.add("unix socket parent dir mode", f"{oct(pmode)} ({parent})", "not o+w without sticky", not risky)
