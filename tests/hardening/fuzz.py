"""Section `fuzz`: thousands of malformed (and some valid) requests, plus a few
slowloris connections alongside. The server must answer each quickly (4xx for bad
input), never 5xx other than 503, never hang, stay alive, and not grow its memory."""

from __future__ import annotations

import asyncio
import json
import time

import httpx

from .common import Section, Target, alive, chat_body, rss_bytes
from .fuzz_cases import CHAT, Case, cases

BODY_CAP = 256 << 10  # read at most this much of an answer: we only classify it


def run_fuzz(url: str, n: int = 10_000, seed: int = 0, *, target: Target | None = None,
             concurrency: int = 16, timeout: float = 60.0, slow: int = 20, slow_timeout: float = 60.0,
             progress=None, routes: str = "openai") -> dict:
    """routes: openai (chat and text completions), agents (Anthropic's Messages, Responses,
    infill, token utilities) or all."""
    target = target or Target(url)
    return asyncio.run(_fuzz(target, n, seed, concurrency, timeout, slow, slow_timeout, progress, routes))


async def _fuzz(target, n, seed, concurrency, timeout, slow, slow_timeout, progress, routes="openai") -> dict:
    sec = Section("fuzz")
    tally: dict[str, int] = {}
    async with target.client(timeout=timeout, connections=concurrency + 4) as client:
        rss_before = await rss_bytes(client, target.pid)
        slow_tasks = [asyncio.create_task(_slowloris(target, i, slow_timeout)) for i in range(slow)]
        died = await _run_cases(target, client, cases(seed, n, routes), concurrency, timeout, sec, tally, progress)
        slow_results = await asyncio.gather(*slow_tasks)
        await asyncio.sleep(1)  # let the last cancelled generations free their memory
        up = await alive(client)
        works = up and await _normal_request_works(client)
        rss_after = await rss_bytes(client, target.pid)

    sent = tally.get("sent", 0)
    sec.add("requests", sent)
    for cls in ("2xx", "4xx", "5xx", "other"):
        sec.add(f"status {cls}", tally.get(cls, 0))
    sec.add("429 (queue full; in 4xx)", tally.get("429", 0))
    sec.add("5xx other than 503", tally.get("bad5xx", 0), "== 0", not tally.get("bad5xx"))
    sec.add("hangs (no answer in time)", tally.get("hang", 0), "== 0", not tally.get("hang"))
    sec.add("unexpected connection errors", tally.get("conn_error", 0), "== 0", not tally.get("conn_error"))
    sec.add("closed on HTTP-level abuse (ok)", tally.get("closed_ok", 0))
    sec.add("broken 2xx (bad JSON / unfinished stream)", tally.get("broken2xx", 0), "== 0", not tally.get("broken2xx"))
    sec.add("4xx not OpenAI-shaped", tally.get("shape", 0))
    sec.add("probe errors (case not sent)", tally.get("probe_error", 0), "== 0", not tally.get("probe_error"))
    sec.add("2xx where 4xx expected", tally.get("accepted_invalid", 0), "== 0", not tally.get("accepted_invalid"))
    sec.add("4xx where 2xx expected", tally.get("refused_valid", 0), "== 0", not tally.get("refused_valid"))
    sec.add("max latency (s)", round(tally.get("max_latency_ms", 0) / 1000, 2))
    _slow_figures(sec, slow_results, slow_timeout)
    sec.add("server died during run", died or "no", "no", not died)
    sec.add("alive after (/health 200 in 5 s)", up, "yes", up)
    sec.add("normal completion after", works, "yes", works)
    _rss_figures(sec, rss_before, rss_after)
    return sec.done()


async def _run_cases(target, client, it, concurrency, timeout, sec, tally, progress) -> str | None:
    """Workers pull cases until done, or until the server stops accepting connections."""
    in_flight: dict[int, Case] = {}
    state = {"died": None}

    async def worker():
        for case in it:
            if state["died"]:
                return
            in_flight[case.index] = case
            out = await _send(target, client, case, timeout)
            del in_flight[case.index]
            _classify(case, out, sec, tally)
            if progress and tally["sent"] % 1000 == 0:
                progress(f"fuzz: {tally['sent']} sent, {tally.get('5xx', 0)} 5xx, {tally.get('hang', 0)} hangs")
            if out.get("refused") and not state["died"] and not await alive(client):
                suspects = [out["case"]] + [c.describe() for c in list(in_flight.values())]
                state["died"] = f"after {tally['sent']} requests"
                for s in suspects:
                    sec.example("server died: request(s) in flight", s)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return state["died"]


async def _send(target: Target, client, case: Case, timeout: float) -> dict:
    headers = dict(case.headers)
    if case.content_type is not None:
        headers["content-type"] = case.content_type
    t0 = time.monotonic()
    out = {"case": case.describe(), "sent": case.body[:160].decode("utf-8", "backslashreplace")}
    try:
        out.update(await asyncio.wait_for(_exchange(target, client, case, headers), timeout))
    except asyncio.TimeoutError:
        out["hang"] = True
    except httpx.ConnectError as exc:
        out.update(conn_error=f"ConnectError: {exc}", refused=True)
    except (httpx.HTTPError, OSError) as exc:  # the server closed or reset the connection
        out["conn_error"] = f"{type(exc).__name__}: {exc}"
    except Exception as exc:  # our side could not send it: not the server's fault, but say so
        out["probe_error"] = f"{type(exc).__name__}: {exc}"
    out["elapsed_s"] = round(time.monotonic() - t0, 2)
    return out


async def _exchange(target: Target, client, case: Case, headers: dict) -> dict:
    if case.raw:
        return await _raw_exchange(target, case, headers)
    req = client.build_request(case.method, case.path, content=case.body if case.body else None,
                               headers=headers)
    r = await client.send(req, stream=True)
    try:
        body, events = bytearray(), 0
        async for chunk in r.aiter_bytes():
            body += chunk
            events = body.count(b"data:")
            if len(body) > BODY_CAP or (case.read_events and events >= case.read_events):
                break
        left = bool(case.read_events and events >= case.read_events) or len(body) > BODY_CAP
        return {"status": r.status_code, "body": bytes(body), "ctype": r.headers.get("content-type", ""),
                "left_early": left}
    finally:
        await r.aclose()


async def _raw_exchange(target: Target, case: Case, headers: dict) -> dict:
    """Request bytes as given, `Connection: close`, answer read until EOF."""
    reader, writer = await target.open_raw()
    try:
        head = [f"{case.method} {case.path} HTTP/1.1", f"Host: {target.host_header}", "Connection: close",
                f"Content-Length: {len(case.body)}"]
        head += [f"{k}: {v}" for k, v in headers.items()]
        if target.api_key:
            head.append(f"Authorization: Bearer {target.api_key}")
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + case.body)
        await writer.drain()
        data = bytearray()
        while len(data) < BODY_CAP and (chunk := await reader.read(65536)):
            data += chunk
    finally:
        writer.close()
    if not data.startswith(b"HTTP/"):
        raise ConnectionResetError("closed without an answer")
    head, _, body = bytes(data).partition(b"\r\n\r\n")
    ctype = next((ln.split(b":", 1)[1].strip().decode() for ln in head.split(b"\r\n")[1:]
                  if ln.lower().startswith(b"content-type:")), "")
    return {"status": int(head.split(b" ", 2)[1]), "body": body, "ctype": ctype,
            "left_early": len(data) >= BODY_CAP}


def _classify(case: Case, out: dict, sec: Section, tally: dict) -> None:
    tally["sent"] = tally.get("sent", 0) + 1
    tally["max_latency_ms"] = max(tally.get("max_latency_ms", 0), int(out["elapsed_s"] * 1000))
    slowest = sec.examples.setdefault("slowest answers", [])
    slowest.append(_example(out))
    slowest.sort(key=lambda e: -e["elapsed_s"])
    del slowest[5:]

    def fail(kind: str, key: str):
        tally[key] = tally.get(key, 0) + 1
        sec.example(kind, _example(out))
        if key == "bad5xx":  # also by message, so that one common 5xx does not hide another
            sec.example(f"5xx '{_error_message(out['body'])[:70]}'", _example(out), limit=3)

    if out.get("hang"):
        return fail("hang", "hang")
    if "probe_error" in out:
        return fail("probe error (not sent)", "probe_error")
    if "conn_error" in out:
        return fail("closed on abuse", "closed_ok") if case.may_close else fail("connection error", "conn_error")
    status = out["status"]
    cls = f"{status // 100}xx" if 200 <= status < 600 and status // 100 in (2, 4, 5) else "other"
    tally[cls] = tally.get(cls, 0) + 1
    tally["429"] = tally.get("429", 0) + (status == 429)
    if status >= 500 and status != 503:
        fail("5xx", "bad5xx")
    elif cls == "2xx" and not out.get("left_early") and not _whole(out):
        fail("broken 2xx", "broken2xx")
    elif cls == "4xx" and not case.may_close and case.method != "HEAD" and not out.get("left_early") \
            and not _openai_error(out["body"]):  # a body we stopped reading cannot be judged
        fail("4xx not OpenAI-shaped", "shape")
    if case.expect == "4xx" and cls == "2xx":
        fail("2xx where 4xx expected", "accepted_invalid")
    elif case.expect == "2xx" and cls == "4xx" and status != 429:  # a full queue is not a refusal
        fail("4xx where 2xx expected", "refused_valid")


def _whole(out: dict) -> bool:
    """A 2xx answer is complete: a JSON body, or an SSE stream ending in [DONE] without error events."""
    body = out["body"]
    if "text/event-stream" in out["ctype"]:
        if b"event: error" in body or b"event: response.failed" in body:
            return False
        tail = body.rstrip()
        last = tail.rsplit(b"\n", 1)[-1]
        return (tail.endswith(b"data: [DONE]")                      # OpenAI chat and text
                or b"event: message_stop" in tail[-200:]             # Anthropic
                or b"event: response.completed" in body or b"event: response.incomplete" in body  # Responses
                or (last.startswith(b"data: ") and b'"stop":true' in last))  # infill
    if not body:  # HEAD, 204
        return True
    try:
        json.loads(body)
        return True
    except ValueError:
        return False


def _error_message(body: bytes) -> str:
    try:
        return str(json.loads(body)["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return body[:70].decode("utf-8", "replace")


def _openai_error(body: bytes) -> bool:
    try:
        err = json.loads(body)["error"]
        return isinstance(err, dict) and isinstance(err.get("message"), str)
    except (ValueError, KeyError, TypeError):
        return False


def _example(out: dict) -> dict:
    body = out.get("body", b"")
    return {"request": out["case"], "body_sent": out["sent"], "status": out.get("status"),
            "error": out.get("conn_error") or ("hang" if out.get("hang") else None),
            "answer_head": body[:300].decode("utf-8", "backslashreplace"), "elapsed_s": out["elapsed_s"]}


async def _normal_request_works(client) -> bool:
    try:
        r = await client.post(CHAT, json=chat_body("Say hi.", 8), timeout=60)
        return r.status_code == 200 and r.json()["choices"][0]["finish_reason"] is not None
    except (httpx.HTTPError, ValueError, KeyError):
        return False


# ---- slowloris ---------------------------------------------------------------------------
SLOW_STYLES = ("headers only", "100 of 1000 bytes then silence", "1 byte every 2 s", "headers 1 line every 2 s")


async def _slowloris(target: Target, i: int, deadline_s: float) -> dict:
    """A request announcing 1000 bytes of body and sending less, slowly. The server
    should answer (408/400) or close before `deadline_s`; a silent open socket is a hang."""
    style = SLOW_STYLES[i % len(SLOW_STYLES)]
    head = [f"POST {CHAT} HTTP/1.1", f"Host: {target.host_header}", "Content-Type: application/json",
            "Content-Length: 1000"]
    if target.api_key:
        head.append(f"Authorization: Bearer {target.api_key}")
    t0 = time.monotonic()
    try:
        reader, writer = await target.open_raw()
    except OSError as exc:
        return {"style": style, "outcome": f"connect failed: {exc}", "elapsed_s": 0.0}

    async def trickle():
        if style.startswith("headers 1 line"):
            for line in head:
                writer.write(line.encode() + b"\r\n")
                await writer.drain()
                await asyncio.sleep(2)
            await asyncio.sleep(deadline_s)
            return
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
        await writer.drain()
        body = b'{"messages": [{"role": "user", "content": "' + b"x" * 1000
        if style.startswith("100"):
            for k in range(0, 100, 10):
                writer.write(body[k:k + 10])
                await writer.drain()
                await asyncio.sleep(1)
        elif style.startswith("1 byte"):
            for b in body[:999]:
                writer.write(bytes([b]))
                await writer.drain()
                await asyncio.sleep(2)
        await asyncio.sleep(deadline_s)

    sender = asyncio.create_task(trickle())
    try:
        data = await asyncio.wait_for(reader.read(4096), deadline_s)
        status = data.split(b" ", 2)[1].decode() if data.startswith(b"HTTP/") else None
        outcome = f"answered {status}" if status else "closed"
    except asyncio.TimeoutError:
        outcome = "hang"
    except OSError:
        outcome = "closed"
    finally:
        sender.cancel()
        writer.close()
    return {"style": style, "outcome": outcome, "elapsed_s": round(time.monotonic() - t0, 1)}


def _slow_figures(sec: Section, results: list[dict], deadline_s: float) -> None:
    if not results:
        return
    hangs = [r for r in results if r["outcome"] == "hang"]
    for r in results:
        if r["outcome"] == "hang":
            sec.example("slow body hang", r)
    outcomes = sorted({f"{r['style']}: {r['outcome']}" for r in results})
    sec.add("slow bodies sent", len(results))
    sec.add(f"slow bodies unanswered after {deadline_s:.0f} s", len(hangs), "== 0", not hangs)
    sec.notes += [f"slow body {o}" for o in outcomes]
    answered = [r["elapsed_s"] for r in results if r["outcome"] != "hang"]
    if answered:
        sec.add("slowest slow-body answer (s)", max(answered))


def _rss_figures(sec: Section, before: float | None, after: float | None) -> None:
    if before is None or after is None:
        sec.add("RSS growth (MiB)", "unknown (no --pid, no edge_infer_rss_bytes)")
        return
    growth = (after - before) / (1 << 20)
    sec.add("RSS before (MiB)", round(before / (1 << 20), 1))
    sec.add("RSS after (MiB)", round(after / (1 << 20), 1))
    sec.add("RSS growth (MiB)", round(growth, 1), "< 200", growth < 200)
