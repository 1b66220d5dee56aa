"""The host's models as /v1/models, Ollama's /api/ps and the TUI show them: loaded,
loading and installed, with state, memory, live requests and time left."""

from __future__ import annotations

import math
import time

from edge_infer.host.resident import Resident
from edge_infer.host.sources import Source


def model_listing(residents: list[Resident], default: str | None, installed: list[Source]) -> list[dict]:
    """residents: loaded and loading; installed: what else a request may load (listed unloaded)."""
    out, seen = [], set()
    for m in residents:
        seen.add(m.path)
        out.append({"name": m.name, "state": m.state, "path": str(m.path), "ram_bytes": m.footprint.ram,
                    "vram_bytes": m.footprint.vram, "active": m.active, "pinned": m.pinned,
                    "idle_seconds": round(m.idle_seconds(), 1), "keep_alive": m.keep_alive,
                    "expires_in": (None if m.expires_at == math.inf or m.active
                                   else max(0.0, round(m.expires_at - time.monotonic(), 1))),
                    "loaded_at": m.loaded_at, "load_seconds": round(m.load_seconds, 3),
                    "default": m.name == default})
    for s in installed:
        if s.path not in seen:
            seen.add(s.path)
            out.append({"name": s.name, "state": "unloaded", "path": str(s.path), "size_bytes": s.size})
    return out


def describe(m: Resident | None, n_loaded: int) -> str:
    """One line for the app's title bar: the default model and how many others are loaded."""
    if m is None:
        return "no model loaded"
    s = m.settings
    others = n_loaded - 1
    more = f" · +{others} more loaded" if others > 0 else ""
    return f"{m.name} · ctx {s.ctx} · {s.parallel} slots · {s.n_threads} threads{more}"
