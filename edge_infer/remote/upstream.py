"""One remote model and its upstreams (base URLs): the choice of upstream for a request and
what each upstream's requests cost. Thread-safe: the event loop's handlers and the health
checker's thread both report to it."""

from __future__ import annotations

import itertools
import statistics
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TypedDict

DEFAULT_TIMEOUT = 600.0         # seconds a request may take (a long generation on a slow remote)
DEFAULT_HEALTH_INTERVAL = 10.0  # seconds between health checks of each upstream


def v1_base(url: str) -> str:
    """The OpenAI base URL (…/v1) of what a user wrote: with or without /v1, trailing slash."""
    url = url.rstrip("/")
    return url if url.endswith("/v1") else url + "/v1"


class UpstreamState(TypedDict):
    """One upstream as the listings show it (Upstream.state())."""
    url: str
    up: bool
    in_flight: int
    requests: int
    errors: int
    last_error: str
    latency_p50_ms: float | None


@dataclass
class Upstream:
    url: str                          # the OpenAI base, ending in /v1
    up: bool = True                   # until a request or a health check says otherwise
    in_flight: int = 0
    requests: int = 0                 # finished, answered or not
    errors: int = 0                   # failed to connect, dropped, timed out or answered 5xx
    last_error: str = ""
    latency_sum: float = 0.0          # seconds, over answered requests
    latency_count: int = 0
    recent: deque = field(default_factory=lambda: deque(maxlen=64))

    @property
    def origin(self) -> str:
        """Where non-OpenAI routes live (Ollama's /api/*, /infill): the base without /v1."""
        return self.url[:-3]

    def url_for(self, path: str) -> str:
        """The upstream URL for one of our routes: /v1/X -> base/X, anything else at the origin."""
        return self.url + path[3:] if path.startswith("/v1/") else self.origin + path

    def latency_p50(self) -> float | None:
        return statistics.median(self.recent) if self.recent else None

    def state(self) -> UpstreamState:
        p50 = self.latency_p50()
        return {"url": self.url, "up": self.up, "in_flight": self.in_flight, "requests": self.requests,
                "errors": self.errors, "last_error": self.last_error,
                "latency_p50_ms": None if p50 is None else round(p50 * 1000, 1)}


class RemoteModel:
    """A name served by one or more remote servers. Requests go to the upstream with the
    fewest outstanding (ties in turn); one that fails is taken out until a health check
    finds it answering again."""

    def __init__(self, name: str, urls: list[str], remote_model: str | None = None, api_key: str | None = None,
                 timeout: float = DEFAULT_TIMEOUT, health_interval: float = DEFAULT_HEALTH_INTERVAL):
        self.name = name
        self.remote_model = remote_model or name
        self.api_key = api_key
        self.timeout, self.health_interval = timeout, health_interval
        self.upstreams = [Upstream(v1_base(u)) for u in dict.fromkeys(urls)]
        self._lock = threading.Lock()
        self._turn = itertools.count()

    # ---- choosing --------------------------------------------------------------------------
    def candidates(self) -> list[Upstream]:
        """Every upstream in the order a request tries them: the answering ones by fewest
        outstanding requests (ties in turn), then those taken out (one may be back before its
        health check says so; trying beats refusing)."""
        with self._lock:
            n = len(self.upstreams)
            start = next(self._turn) % n
            turn = {id(u): (i - start) % n for i, u in enumerate(self.upstreams)}
            return sorted(self.upstreams, key=lambda u: (not u.up, u.in_flight, turn[id(u)]))

    @property
    def healthy(self) -> int:
        return sum(u.up for u in self.upstreams)

    # ---- what happened ---------------------------------------------------------------------
    def started(self, u: Upstream) -> float:
        with self._lock:
            u.in_flight += 1
        return time.monotonic()

    def finished(self, u: Upstream, since: float, error: str | None = None) -> None:
        """A request on `u` ended: answered (error None), or failed (taken out)."""
        seconds = time.monotonic() - since
        with self._lock:
            u.in_flight -= 1
            u.requests += 1
            if error is None:
                u.latency_sum += seconds
                u.latency_count += 1
                u.recent.append(seconds)
            else:
                self._fail(u, error)

    def checked(self, u: Upstream, error: str | None) -> None:
        """A health check's verdict."""
        with self._lock:
            if error is None:
                u.up = True
            else:
                u.up, u.last_error = False, error

    def _fail(self, u: Upstream, error: str) -> None:
        u.errors += 1
        u.up, u.last_error = False, error

    def listing(self) -> dict:
        """This model as /v1/models, /api/tags and the TUI list it."""
        with self._lock:
            upstreams = [u.state() for u in self.upstreams]
        return {"name": self.name, "state": "remote", "remote_model": self.remote_model,
                "active": sum(u["in_flight"] for u in upstreams), "upstreams": upstreams,
                "healthy": sum(u["up"] for u in upstreams)}
