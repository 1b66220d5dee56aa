"""Holds the app's engine: load, swap, close. Blocking work happens on the caller's
worker thread; the UI only reads `engine` and `description`."""

from __future__ import annotations

import threading
from pathlib import Path

from edge_infer.config import EngineSettings


class EngineHost:
    def __init__(self):
        self.engine = None
        self.model_name: str | None = None
        self.model_path: Path | None = None
        self.settings: EngineSettings | None = None
        self._lock = threading.Lock()

    @property
    def ready(self) -> bool:
        return self.engine is not None

    def load(self, path: Path, settings: EngineSettings, name: str | None = None):
        """Load a model (blocking). The old engine keeps serving until the new one is ready."""
        from edge_infer.engine import Engine

        new = Engine(path, settings, name=name)
        with self._lock:
            old, self.engine = self.engine, new
            self.model_name, self.model_path, self.settings = new.name, Path(path), settings
        if old is not None:
            old.close()
        return new

    def close(self) -> None:
        with self._lock:
            old, self.engine = self.engine, None
        if old is not None:
            old.close()

    @property
    def description(self) -> str:
        if not self.engine:
            return "no model loaded"
        s = self.settings
        return f"{self.model_name} · ctx {s.ctx} · {s.parallel} slots · {s.n_threads} threads"
