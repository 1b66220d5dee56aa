"""Sections `load` (many clients, nothing lost) and `disconnect` (clients that leave
mid-stream must give their slots back, and the server must stay as fast)."""

from __future__ import annotations

import asyncio
import json
import random
import time

import httpx

from .common import Section, Target, chat_body, completion_body, metrics, percentile, sse_events, timed_completion

KINDS = ("chat-stream", "chat", "completion-stream", "completion")


# ---- load --------------------------------------------------------------------------------
def run_load(url: str, clients: int = 64, per_client: int = 4, *, target: Target | None = None,
             seed: int = 0, timeout: float = 180.0) -> dict:
    target = target or Target(url)
    return asyncio.run(_load(target, clients, per_client, seed, timeout))


async def _load(target: Target, clients: int, per_client: int, seed: int, timeout: float) -> dict:
    sec = Section("load")
    rng = random.Random(seed)
    plan = [[(KINDS[(c + i) % 4], rng.randint(16, 32)) for i in range(per_client)] for c in range(clients)]
    outcomes: list[dict] = []
    async with target.client(timeout=timeout, connections=clients + 8) as client:
        async def one_client(jobs):
            for kind, max_tokens in jobs:
                outcomes.append(await _request_with_retry(client, kind, max_tokens, timeout))
        await asyncio.gather(*(one_client(jobs) for jobs in plan))

    ok = [o for o in outcomes if o["ok"]]
    lost = [o for o in outcomes if not o["ok"]]
    for o in lost:
        sec.example("lost", o)
    lat = [o["latency_s"] for o in ok]
    sec.add("requests sent", len(outcomes))
    sec.add("ok (complete answer)", len(ok))
    sec.add("lost", len(lost), "== 0", not lost)
    sec.add("5xx responses", sum(o["n5xx"] for o in outcomes), "== 0", not any(o["n5xx"] for o in outcomes))
    sec.add("429 responses (retried)", sum(o["n429"] for o in outcomes))
    sec.add("stream error events", sum(o.get("error_event", 0) for o in outcomes), "== 0",
            not any(o.get("error_event") for o in outcomes))
    sec.add("latency p50 (s)", round(percentile(lat, 50), 2))
    sec.add("latency p99 (s)", round(percentile(lat, 99), 2))
    return sec.done()


async def _request_with_retry(client, kind: str, max_tokens: int, timeout: float, tries: int = 5) -> dict:
    """One request; a 429 is retried after its Retry-After so that it is not lost."""
    n429 = n5xx = 0
    t0 = time.monotonic()
    for _ in range(tries):
        try:
            res = await asyncio.wait_for(_one(client, kind, max_tokens), timeout)
        except asyncio.TimeoutError:
            res = {"status": None, "ok": False, "why": f"no complete answer within {timeout:.0f} s"}
        except httpx.HTTPError as exc:
            res = {"status": None, "ok": False, "why": f"{type(exc).__name__}: {exc}"}
        status = res.get("status") or 0
        n5xx += status >= 500
        if status == 429:
            n429 += 1
            await asyncio.sleep(float(res.get("retry_after") or 1))
            continue
        break
    return {"kind": kind, "max_tokens": max_tokens, "n429": n429, "n5xx": n5xx,
            "latency_s": time.monotonic() - t0, **res}


async def _one(client, kind: str, max_tokens: int) -> dict:
    path = "/v1/chat/completions" if kind.startswith("chat") else "/v1/completions"
    body = (chat_body if kind.startswith("chat") else completion_body)(
        "Tell me a short story about a fox." if kind.startswith("chat") else "The fox ran", max_tokens)
    if not kind.endswith("stream"):
        r = await client.post(path, json=body)
        res = {"status": r.status_code, "retry_after": r.headers.get("retry-after")}
        if r.status_code != 200:
            return {**res, "ok": False, "why": r.text[:200]}
        finish = r.json()["choices"][0].get("finish_reason")
        return {**res, "ok": finish is not None, "why": None if finish else "no finish_reason"}
    body["stream"] = True
    async with client.stream("POST", path, json=body) as r:
        res = {"status": r.status_code, "retry_after": r.headers.get("retry-after")}
        if r.status_code != 200:
            await r.aread()
            return {**res, "ok": False, "why": r.text[:200]}
        finish = done = False
        error_event = 0
        async for data in sse_events(r):
            if data == "[DONE]":
                done = True
                break
            chunk = json.loads(data)
            if "error" in chunk:
                error_event += 1
            finish = finish or any(c.get("finish_reason") for c in chunk.get("choices", []))
    ok = done and finish and not error_event
    return {**res, "ok": ok, "error_event": error_event,
            "why": None if ok else f"[DONE] {done}, finish_reason {finish}, error events {error_event}"}


# ---- disconnect ----------------------------------------------------------------------------
def run_disconnect(url: str, n: int = 100, wave: int = 20, *, target: Target | None = None,
                   seed: int = 0, drain_s: float = 10.0) -> dict:
    target = target or Target(url)
    return asyncio.run(_disconnect(target, n, wave, seed, drain_s))


async def _disconnect(target: Target, n: int, wave: int, seed: int, drain_s: float) -> dict:
    sec = Section("disconnect")
    rng = random.Random(seed)
    async with target.client(timeout=120) as client:
        before = await _speed(client)
        before_cancelled = (await metrics(client)).get("edge_infer_cancelled_requests_total", 0.0)
        errors = 0
        for start in range(0, n, wave):
            results = await asyncio.gather(*(_leave_early(target, rng.randint(1, 3), i % 2 == 0)
                                             for i in range(start, min(n, start + wave))))
            errors += sum(1 for r in results if r is not None)
            for r in results:
                if r is not None:
                    sec.example("unexpected", r)
        busy, queued, waited = await _drain(client, drain_s)
        cancelled = (await metrics(client)).get("edge_infer_cancelled_requests_total", 0.0) - before_cancelled
        after = await _speed(client)

    ratio = after / before if before else 0.0
    sec.add("clients that left early", n)
    sec.add("unexpected answers", errors, "== 0", errors == 0)
    sec.add("slots leaked (busy after wait)", busy, "== 0", busy == 0)
    sec.add("queue left after wait", queued, "== 0", queued == 0)
    sec.add("seconds until idle", round(waited, 1), f"<= {drain_s:.0f}")
    sec.add("cancelled counter delta", int(cancelled))
    sec.add("tok/s before", round(before, 1))
    sec.add("tok/s after", round(after, 1))
    sec.add("after / before", round(ratio, 2), ">= 0.7", ratio >= 0.7)
    return sec.done()


async def _speed(client, tries: int = 3) -> float:
    """Best of a few: one sample is at the mercy of whatever else runs on the CPU."""
    return max([await timed_completion(client) for _ in range(tries)])


async def _leave_early(target: Target, chunks: int, chat: bool) -> dict | None:
    """Start a long stream, read a few events, then drop the connection (own client,
    so the socket really closes rather than going back to a pool)."""
    path = "/v1/chat/completions" if chat else "/v1/completions"
    body = (chat_body("Write a long essay about rivers.", 200) if chat
            else completion_body("The river", 200))
    body.update(stream=True, ignore_eos=True)
    try:
        async with target.client(timeout=60, connections=1) as c:
            async with c.stream("POST", path, json=body) as r:
                if r.status_code != 200:
                    await r.aread()
                    return {"path": path, "status": r.status_code, "body": r.text[:200]}
                async for _ in sse_events(r, limit=chunks):
                    pass
    except httpx.HTTPError as exc:
        return {"path": path, "status": None, "body": f"{type(exc).__name__}: {exc}"}
    return None


async def _drain(client, wait_s: float) -> tuple[int, int, float]:
    t0 = time.monotonic()
    while True:
        m = await metrics(client)
        busy, queued = int(m.get("edge_infer_slots_busy", 0)), int(m.get("edge_infer_queue_depth", 0))
        waited = time.monotonic() - t0
        if (busy == 0 and queued == 0) or waited >= wait_s:
            return busy, queued, waited
        await asyncio.sleep(0.2)
