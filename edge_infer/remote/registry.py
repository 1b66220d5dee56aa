"""The remote models of a models config, and the thread that checks their upstreams."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import httpx

from edge_infer.errors import EdgeInferError
from edge_infer.remote.upstream import DEFAULT_HEALTH_INTERVAL, DEFAULT_TIMEOUT, RemoteModel, Upstream

CHECK_TIMEOUT = 5.0  # seconds a health check waits for an answer


class RemoteConfigError(EdgeInferError):
    pass


def api_key_of(name: str, entry) -> str | None:
    """The key a [models.NAME] entry names: from the environment or a file, read once at start."""
    if entry.api_key_env:
        key = os.environ.get(entry.api_key_env, "").strip()
        if not key:
            raise RemoteConfigError(f"[models.{name}] api_key_env: {entry.api_key_env} is not set")
        return key
    if entry.api_key_file:
        path = Path(entry.api_key_file).expanduser()
        try:
            key = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise RemoteConfigError(f"[models.{name}] api_key_file: cannot read {path}: {exc}") from None
        if not key:
            raise RemoteConfigError(f"[models.{name}] api_key_file: {path} is empty")
        return key
    return None


def headers_for(model: RemoteModel) -> dict[str, str]:
    """Auth for an upstream: OpenAI's bearer and Anthropic's x-api-key (each server reads its own)."""
    return {"Authorization": f"Bearer {model.api_key}", "x-api-key": model.api_key} if model.api_key else {}


class RemoteModels:
    """name -> RemoteModel for every [models.NAME] with `remote`; health checks run in a
    daemon thread between start() and close()."""

    def __init__(self, models: list[RemoteModel] = ()):
        self.models = {m.name.lower(): m for m in models}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def from_config(cls, config) -> "RemoteModels":
        return cls([RemoteModel(name, e.remote, e.remote_model, api_key_of(name, e),
                                e.timeout or DEFAULT_TIMEOUT, e.health_interval or DEFAULT_HEALTH_INTERVAL)
                    for name, e in config.models.items() if e.remote])

    def __bool__(self) -> bool:
        return bool(self.models)

    def find(self, name: str | None) -> RemoteModel | None:
        return self.models.get(name.lower()) if isinstance(name, str) else None

    def names(self) -> list[str]:
        return [m.name for m in self.models.values()]

    def listing(self) -> list[dict]:
        return [m.listing() for m in self.models.values()]

    # ---- health checks ---------------------------------------------------------------------
    def start(self) -> None:
        if self.models and self._thread is None:
            self._thread = threading.Thread(target=self._check_forever, name="edge-infer-remote-health",
                                            daemon=True)
            self._thread.start()

    def close(self) -> None:
        self._stop.set()

    def _check_forever(self) -> None:
        due = {id(u): 0.0 for m in self.models.values() for u in m.upstreams}
        with httpx.Client(timeout=CHECK_TIMEOUT) as client:
            while not self._stop.is_set():
                now = time.monotonic()
                for m in self.models.values():
                    for u in m.upstreams:
                        if now >= due[id(u)]:
                            m.checked(u, check(client, m, u))
                            due[id(u)] = time.monotonic() + m.health_interval
                wake = min(due.values()) - time.monotonic()
                self._stop.wait(max(0.05, wake))


def check(client: httpx.Client, model: RemoteModel, u: Upstream) -> str | None:
    """None when the upstream lists models (every OpenAI-compatible server answers
    GET /v1/models), else why not, in a few words."""
    try:
        r = client.get(f"{u.url}/models", headers=headers_for(model))
    except httpx.HTTPError as exc:
        return f"health check: {type(exc).__name__}: {exc}"[:300]
    if r.status_code != 200:
        return f"health check: GET /models answered {r.status_code}"
    return None
