"""Shared plumbing for the hardening probe: HTTP clients (TCP or Unix socket), raw
sockets for what httpx will not send, /metrics parsing, RSS, and the figure tables.

Stdlib + httpx only (psutil optional): the probe must run against any
OpenAI-compatible server, so nothing here imports edge_infer.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httpx

DEFAULT_URL = "http://127.0.0.1:8000"


@dataclass
class Target:
    """Where to reach the server and how to authenticate."""
    url: str = DEFAULT_URL
    api_key: str | None = None
    unix: str | None = None   # Unix socket path; the URL then only names the Host
    pid: int | None = None    # server pid, for RSS via psutil

    def client(self, timeout: float = 120.0, connections: int = 128, auth: bool = True) -> httpx.AsyncClient:
        transport = httpx.AsyncHTTPTransport(uds=self.unix) if self.unix else None
        headers = {"Authorization": f"Bearer {self.api_key}"} if (auth and self.api_key) else {}
        # pool=None: a request waiting for a pooled connection is not a server hang.
        return httpx.AsyncClient(base_url=self.url, transport=transport, headers=headers,
                                 timeout=httpx.Timeout(timeout, connect=10.0, pool=None),
                                 # Idle connections are dropped before a server's keep-alive
                                 # timeout (uvicorn: 5 s) can close them under a new request.
                                 limits=httpx.Limits(max_connections=connections,
                                                     max_keepalive_connections=connections,
                                                     keepalive_expiry=2.0))

    async def open_raw(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A bare connection, for partial bodies and paths httpx would normalise."""
        if self.unix:
            return await asyncio.open_unix_connection(self.unix)
        u = urlsplit(self.url)
        return await asyncio.open_connection(u.hostname, u.port or (443 if u.scheme == "https" else 80))

    @property
    def host_header(self) -> str:
        return urlsplit(self.url).netloc or "localhost"


# ---- figures ---------------------------------------------------------------------------
@dataclass
class Section:
    """One section's figures: (name, value, target text, ok) where ok None = informational."""
    name: str
    figures: list[tuple[str, object, str, bool | None]] = field(default_factory=list)
    examples: dict[str, list] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    elapsed_s: float = 0.0

    def add(self, name: str, value, target: str = "", ok: bool | None = None) -> None:
        self.figures.append((name, value, target, ok))

    def example(self, kind: str, item, limit: int = 10) -> None:
        bucket = self.examples.setdefault(kind, [])
        if len(bucket) < limit:
            bucket.append(item)

    @property
    def ok(self) -> bool:
        return all(ok is not False for *_, ok in self.figures)

    def done(self) -> dict:
        self.elapsed_s = round(time.monotonic() - self.started, 1)
        return self.to_dict()

    def to_dict(self) -> dict:
        return {"section": self.name, "ok": self.ok, "elapsed_s": self.elapsed_s,
                "figures": [{"name": n, "value": v, "target": t, "ok": ok} for n, v, t, ok in self.figures],
                "values": {n: v for n, v, *_ in self.figures},
                "examples": self.examples, "notes": self.notes}


def format_table(result: dict) -> str:
    rows = [("figure", "value", "target", "ok")]
    for f in result["figures"]:
        ok = {True: "ok", False: "FAIL", None: "-"}[f["ok"]]
        rows.append((f["name"], _fmt(f["value"]), f["target"] or "-", ok))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = [f"== {result['section']} ({result['elapsed_s']} s): {'PASS' if result['ok'] else 'FAIL'}"]
    for i, r in enumerate(rows):
        lines.append("  " + " | ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
        if i == 0:
            lines.append("  " + "-+-".join("-" * w for w in widths))
    lines += [f"  note: {n}" for n in result.get("notes", [])]
    return "\n".join(lines)


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}"
    if isinstance(v, (list, tuple)):
        return ", ".join(map(str, v)) or "none"
    return str(v)


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(p / 100 * len(s)) - 1))]


# ---- server state ----------------------------------------------------------------------
def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text -> {metric name: value}, labels dropped (one model per server)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name_labels, _, value = line.rpartition(" ")
        name = name_labels.split("{", 1)[0]
        try:
            out[name] = out.get(name, 0.0) + float(value)
        except ValueError:
            pass
    return out


async def metrics(client: httpx.AsyncClient) -> dict[str, float]:
    r = await client.get("/metrics", timeout=10)
    r.raise_for_status()
    return parse_metrics(r.text)


async def rss_bytes(client: httpx.AsyncClient, pid: int | None) -> float | None:
    """The server's resident memory: psutil on --pid when possible, else its own gauge."""
    if pid:
        try:
            import psutil
            return float(psutil.Process(pid).memory_info().rss)
        except Exception:
            pass
    try:
        return (await metrics(client)).get("edge_infer_rss_bytes")
    except Exception:
        return None


async def alive(client: httpx.AsyncClient, timeout: float = 5.0) -> bool:
    try:
        r = await client.get("/health", timeout=timeout)
        return r.status_code == 200
    except httpx.HTTPError:
        return False


async def sse_events(response: httpx.Response, limit: int | None = None):
    """`data:` payloads of an SSE response as they come (strings), up to `limit`."""
    n = 0
    async for line in response.aiter_lines():
        if line.startswith("data:"):
            yield line[5:].strip()
            n += 1
            if limit is not None and n >= limit:
                return


def chat_body(text: str = "Say hello.", max_tokens: int = 8, **extra) -> dict:
    return {"messages": [{"role": "user", "content": text}], "max_tokens": max_tokens, **extra}


def completion_body(prompt: str = "Once upon a time", max_tokens: int = 8, **extra) -> dict:
    return {"prompt": prompt, "max_tokens": max_tokens, **extra}


async def timed_completion(client: httpx.AsyncClient, tokens: int = 32) -> float:
    """Decode speed of one plain request, in generated tokens per second."""
    body = completion_body("The history of the city begins", tokens, temperature=0, ignore_eos=True)
    t0 = time.monotonic()
    r = await client.post("/v1/completions", json=body, timeout=120)
    dt = time.monotonic() - t0
    r.raise_for_status()
    return r.json()["usage"]["completion_tokens"] / dt
