"""The model host: which engines are loaded, under which names, with which settings, and
when they go away. The server, the TUI and the commands all get engines from it.

One model at a time for now. The interface is the one many models need: get(model)
finds the engine that serves a name, loaded() lists what is in memory, unload() frees
it. Loading on demand and eviction by memory come with them (issue "many models").

Loading is blocking (seconds): call it from a worker thread. The old engine keeps
serving until the new one is ready, then it is closed.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from edge_infer.config import EngineSettings
from edge_infer.errors import ModelNotFoundError


class ModelNotLoadedError(ModelNotFoundError):
    """A request named a model this host does not hold (the server answers 404)."""

    def __init__(self, model: str, served: list[str]):
        shown = model if len(model) <= 200 else model[:200] + "…"  # never echo megabytes back
        held = ", ".join(f"'{name}'" for name in served) or "no model (none is loaded)"
        super().__init__(f"the model '{shown}' does not exist; this server serves {held}")
        self.model, self.served = model, served


@dataclass
class LoadedModel:
    """One engine in memory and the names that reach it."""
    name: str                        # what /v1/models lists and the UI shows
    path: Path
    settings: EngineSettings
    engine: object                   # edge_infer.engine.Engine (or a test double)
    aliases: frozenset[str] = field(default_factory=frozenset)
    loaded_at: float = field(default_factory=time.time)

    def answers_to(self, model: str) -> bool:
        return model == self.name or model in self.aliases


def _open_engine(path: Path, settings: EngineSettings, name: str):
    from edge_infer.engine import Engine  # loads llama.cpp: only when a model is loaded

    return Engine(path, settings, name=name)


def _locate(spec: str | None) -> tuple[Path, str]:
    import sys

    from edge_infer.store.store import ModelStore

    # Provisioning messages go to stderr: a command's stdout carries the model's text.
    return ModelStore().locate(spec, progress=lambda line: print(line, file=sys.stderr))


class ModelHost:
    """Seams (ollama's sched.go style): `locate` turns a MODEL argument into (path, name)
    and `open_engine` builds an engine, so tests can hand in their own."""

    def __init__(self, *, locate: Callable[[str | None], tuple[Path, str]] = _locate,
                 open_engine: Callable[[Path, EngineSettings, str], object] = _open_engine):
        self._locate, self._open_engine = locate, open_engine
        self._models: list[LoadedModel] = []
        self._lock = threading.Lock()

    # ---- loading ---------------------------------------------------------------------
    def load(self, spec: str | None, settings: EngineSettings, name: str | None = None,
             aliases: tuple[str, ...] = ()) -> LoadedModel:
        """Resolve `spec` (None = the catalog default), load it, and make it the served
        model. Raises the store's or the engine's error and keeps the old model if any."""
        path, resolved = self._locate(spec)
        name = name or resolved
        engine = self._open_engine(path, settings, name)
        return self.adopt(engine, path, settings, name=name, aliases=aliases)

    def adopt(self, engine, path: Path | str | None = None, settings: EngineSettings | None = None,
              name: str | None = None, aliases: tuple[str, ...] = ()) -> LoadedModel:
        """Serve an engine built elsewhere (benchmarks, tests). The host owns it from now on."""
        path = Path(path or engine.model.path)
        name = name or getattr(engine, "name", None) or path.stem
        settings = getattr(engine, "settings", None) or settings or EngineSettings()  # as the engine made them
        # The served name plus whatever else clearly means the same file.
        names = frozenset({path.stem, path.name, *aliases} - {name})
        entry = LoadedModel(name, path, settings, engine, names)
        with self._lock:
            old, self._models = self._models, [entry]
        for gone in old:
            if gone.engine is not engine:
                gone.engine.close()
        return entry

    # ---- finding ---------------------------------------------------------------------
    def get(self, model: str | None = None):
        """The engine that serves `model` (None: the default one). ModelNotLoadedError if none."""
        found = self.find(model)
        if found is None:
            raise ModelNotLoadedError(model or "", self.names())
        return found.engine

    def find(self, model: str | None = None) -> LoadedModel | None:
        models = self._models
        if model is None:
            return models[0] if models else None
        return next((m for m in models if m.answers_to(model)), None)

    def loaded(self) -> list[LoadedModel]:
        return list(self._models)

    def names(self) -> list[str]:
        return [m.name for m in self._models]

    @property
    def current(self) -> LoadedModel | None:
        """The default model: what the app chats with and a request without `model` gets."""
        return self.find(None)

    @property
    def ready(self) -> bool:
        return bool(self._models)

    @property
    def description(self) -> str:
        m = self.current
        if m is None:
            return "no model loaded"
        s = m.settings
        return f"{m.name} · ctx {s.ctx} · {s.parallel} slots · {s.n_threads} threads"

    # ---- freeing ---------------------------------------------------------------------
    def unload(self, model: str | None = None) -> bool:
        """Close the engine serving `model` (None: the default one); False if none did."""
        with self._lock:
            found = self.find(model)
            if found is None:
                return False
            self._models = [m for m in self._models if m is not found]
        found.engine.close()
        return True

    def close(self) -> None:
        with self._lock:
            gone, self._models = self._models, []
        for m in gone:
            m.engine.close()

    def __enter__(self) -> "ModelHost":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
