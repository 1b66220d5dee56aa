"""One model the host knows: where it is, how it loads, and while loaded its engine,
live requests (leases) and when it may go. Lease: a request's hold on a loaded model.
describe: the default model in one line."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from edge_infer.config import EngineSettings
from edge_infer.host.residency import Footprint

if TYPE_CHECKING:
    from edge_infer.engine import ServedEngine


@dataclass
class Resident:
    name: str                        # what /v1/models lists and the UI shows
    path: Path
    settings: EngineSettings
    footprint: Footprint             # the memory plan this model holds (or will, while loading)
    aliases: frozenset[str] = field(default_factory=frozenset)
    keep_alive: float = math.inf     # seconds after its last request (inf = until room is needed)
    pinned: bool = False
    engine: ServedEngine | None = None  # None while loading
    error: BaseException | None = None  # why the load failed (waiters get the same error)
    active: int = 0                  # leases held by requests
    loaded_at: float = 0.0
    last_used: float = field(default_factory=time.monotonic)
    expires_at: float = math.inf     # monotonic time to unload at once idle
    load_seconds: float = 0.0

    @property
    def state(self) -> str:
        if self.engine is None:
            return "loading"
        return "unavailable" if self.engine.state == "failed" else "loaded"

    def answers_to(self, model: str) -> bool:
        m = model.lower()
        return m == self.name.lower() or m in {a.lower() for a in self.aliases}

    def idle(self) -> bool:
        """No lease and nothing in the engine (the TUI submits without a lease)."""
        if self.active or self.engine is None:
            return False
        snap = self.engine.snapshot()
        return snap.slots_busy == 0 and snap.queued == 0

    def idle_seconds(self) -> float:
        return 0.0 if self.active else max(0.0, time.monotonic() - self.last_used)


class Lease:
    """A request's hold on a loaded model: while held the model is never unloaded.
    release() once the response is over (any number of times: only the first counts)."""

    def __init__(self, on_release: Callable[["Lease"], None], resident: Resident, keep_alive: float | None):
        self._on_release, self.resident, self.keep_alive = on_release, resident, keep_alive
        self.released = False

    @property
    def engine(self) -> ServedEngine:
        return self.resident.engine

    @property
    def name(self) -> str:
        return self.resident.name

    def release(self) -> None:
        if not self.released:
            self.released = True
            self._on_release(self)

    def __enter__(self) -> "Lease":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def describe(m: Resident | None, n_loaded: int) -> str:
    """One line for the app's title bar: the default model and how many others are loaded."""
    if m is None:
        return "no model loaded"
    s = m.settings
    others = n_loaded - 1
    more = f" · +{others} more loaded" if others > 0 else ""
    return f"{m.name} · ctx {s.ctx} · {s.parallel} slots · {s.n_threads} threads{more}"
