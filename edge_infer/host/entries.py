"""One ModelEntry per model a request may name, local and remote alike: what /v1/models,
Ollama's /api/tags and /api/ps, /health and the TUI's Server tab render. Built here from
the host's residents (loaded and loading), the installed models it may load, the failures
it recorded and the remote models (edge_infer.remote), so no renderer merges them itself."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from edge_infer.host.keep_alive import FOREVER
from edge_infer.host.residency import Footprint
from edge_infer.host.resident import Resident
from edge_infer.host.sources import Source
from edge_infer.remote import RemoteModels
from edge_infer.remote.upstream import UpstreamState

LOCAL: Literal["local"] = "local"
REMOTE: Literal["remote"] = "remote"


@dataclass(frozen=True)
class ModelEntry:
    """A model as the listings show it, at one moment. `memory` says whether it is resident
    here (loaded, loading, or loaded with its engine failed); an installed model has
    `size_bytes` instead; a remote one has neither, its upstreams instead."""
    name: str
    kind: Literal["local", "remote"]
    state: str                          # local: loaded | loading | unloaded | unavailable; remote: remote
    path: Path | None = None            # local: its file
    memory: Footprint | None = None     # resident: its memory plan
    size_bytes: int | None = None       # installed, not resident: its file's size
    active: int = 0                     # requests holding it (remote: in flight on its upstreams)
    pinned: bool = False
    default: bool = False               # what a request without `model` gets
    idle_seconds: float = 0.0           # since its last request, 0 while busy (0.1 s steps)
    keep_alive: float = FOREVER         # seconds it stays after its last request
    expires_in: float | None = None     # seconds until keep-alive unloads it; None: busy or until needed
    loaded_at: float = 0.0              # wall-clock time its engine came up
    load_seconds: float = 0.0
    failure: str | None = None          # why it is unavailable
    remote_model: str | None = None     # remote: its name upstream
    upstreams: tuple[UpstreamState, ...] = ()  # remote: each server's state (edge_infer.remote)
    healthy: int = 0                    # remote: upstreams answering

    @property
    def is_remote(self) -> bool:
        return self.kind == REMOTE

    def as_dict(self) -> dict:
        """The entry as the host's listing() gives it (the dicts the listings were built from)."""
        if self.is_remote:
            return {"name": self.name, "state": self.state, "remote_model": self.remote_model,
                    "active": self.active, "upstreams": list(self.upstreams), "healthy": self.healthy}
        if self.memory is None:
            out = {"name": self.name, "state": self.state, "path": str(self.path), "size_bytes": self.size_bytes}
            return out if self.failure is None else {**out, "error": self.failure}
        return {"name": self.name, "state": self.state, "path": str(self.path), "ram_bytes": self.memory.ram,
                "vram_bytes": self.memory.vram, "active": self.active, "pinned": self.pinned,
                "idle_seconds": self.idle_seconds, "keep_alive": self.keep_alive, "expires_in": self.expires_in,
                "loaded_at": self.loaded_at, "load_seconds": self.load_seconds, "default": self.default}

    @classmethod
    def from_dict(cls, d: dict) -> "ModelEntry":
        """as_dict() read back; a field a dict leaves out takes its default."""
        plain = {k: v for k, v in d.items() if k in _PLAIN_FIELDS}
        if d["state"] == REMOTE:
            return cls(kind=REMOTE, **{**plain, "path": None, "upstreams": tuple(d.get("upstreams", ()))})
        memory = Footprint(d["ram_bytes"], d.get("vram_bytes", 0)) if "ram_bytes" in d else None
        return cls(kind=LOCAL, memory=memory, failure=d.get("error"),
                   **{**plain, "path": Path(d["path"]) if d.get("path") else None})


_PLAIN_FIELDS = {"name", "state", "path", "size_bytes", "active", "pinned", "default", "idle_seconds", "keep_alive",
                 "expires_in", "loaded_at", "load_seconds", "remote_model", "healthy"}


def resident_entry(m: Resident, default: str | None) -> ModelEntry:
    """A loaded or loading model. Keep-alive's clock runs only while it is idle."""
    state = m.state  # asks the engine once
    return ModelEntry(
        m.name, LOCAL, state, path=m.path, memory=m.footprint, active=m.active, pinned=m.pinned,
        default=m.name == default, idle_seconds=round(m.idle_seconds(), 1), keep_alive=m.keep_alive,
        expires_in=(None if m.expires_at == math.inf or m.active
                    else max(0.0, round(m.expires_at - time.monotonic(), 1))),
        loaded_at=m.loaded_at, load_seconds=round(m.load_seconds, 3),
        failure=getattr(m.engine, "failure", None) if state == "unavailable" else None)


def installed_entry(s: Source, failures: dict[str, str]) -> ModelEntry:
    """An installed model not resident: unloaded, or unavailable while its last engine's
    failure stands (host/failures.py)."""
    failure = failures.get(s.name)
    return ModelEntry(s.name, LOCAL, "unloaded" if failure is None else "unavailable", path=s.path,
                      size_bytes=s.size, failure=failure)


def local_entries(residents: list[Resident], default: str | None, installed: list[Source],
                  failures: dict[str, str]) -> list[ModelEntry]:
    """residents: loaded and loading, in load order; then the installed models not among them."""
    out = [resident_entry(m, default) for m in residents]
    seen = {m.path for m in residents}
    for s in installed:
        if s.path not in seen:
            seen.add(s.path)
            out.append(installed_entry(s, failures))
    return out


def remote_entry(listing: dict) -> ModelEntry:
    """A remote model from RemoteModel.listing(): one reading of its upstreams, under its lock."""
    return ModelEntry(listing["name"], REMOTE, REMOTE, active=listing["active"], remote_model=listing["remote_model"],
                      upstreams=tuple(listing["upstreams"]), healthy=listing["healthy"])


def remote_entries(remotes: RemoteModels) -> list[ModelEntry]:
    return [remote_entry(m) for m in remotes.listing()]
