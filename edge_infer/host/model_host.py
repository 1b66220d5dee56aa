"""The model host: which engines are loaded, under which names, and when they go away.
The server, the TUI and the commands all get engines from it.

Many models, loaded on demand: acquire(model) returns a lease on the engine serving that
name, loading the installed model first if needed (concurrent first requests load it
once). Loaded models stay while their memory plans fit the budget; a load that needs room
unloads the least recently used idle model first (ollama's sched.go, LM Studio's JIT).
A model with live requests is never unloaded: a load waits for one to go idle, with a
bound on how many may wait. keep_alive (per request, per model, host default) unloads a
model that long after its last request; pinned models stay.

Loading is blocking (seconds): call acquire/load from a worker thread, never the event loop.
"""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from edge_infer.config import EngineSettings
from edge_infer.host.failures import Failures
from edge_infer.host.errors import HostBusyError, ModelDoesNotFitError, ModelNotLoadedError
from edge_infer.host.entries import LOCAL, ModelEntry, local_entries, remote_entries
from edge_infer.host.keep_alive import FOREVER
from edge_infer.host.model_config import ModelsConfig
from edge_infer.host.reaper import reap
from edge_infer.host.resident import Lease, Resident, describe
from edge_infer.host.residency import (Budget, Candidate, Footprint, choose_evictions, engine_footprint, fits_alone,
                                      plan_footprint)
from edge_infer.host.seams import locate_model, open_engine, unlimited
from edge_infer.host.sources import Source, find_installed, installed_sources, names_of, readable_sources
from edge_infer.host.templates import resident_template, template_for
from edge_infer.remote import RemoteModels

if TYPE_CHECKING:
    from edge_infer.engine import ServedEngine


class ModelHost:
    """Seams (ollama's sched.go style) so tests can hand in their own: `locate` turns a
    MODEL argument into (path, name), `find_source`/`list_sources` name what requests may
    load, `open_engine` builds an engine, `footprint` plans its memory."""

    def __init__(self, *, locate: Callable[[str | None], tuple[Path, str]] = locate_model,
                 open_engine: Callable[[Path, EngineSettings, str], ServedEngine] = open_engine,
                 find_source: Callable[[str], Source | None] = find_installed,
                 list_sources: Callable[[], list[Source]] = installed_sources,
                 footprint: Callable[[Path, EngineSettings], Footprint] = plan_footprint,
                 budget: Budget | None = None, settings: EngineSettings | None = None,
                 config: ModelsConfig | None = None, keep_alive: float = FOREVER,
                 max_waiting: int = 32, on_demand: bool = True):
        self._locate, self._open_engine = locate, open_engine
        self._find_source, self._list_sources, self._footprint = find_source, list_sources, footprint
        self.budget = budget or unlimited()
        self.settings = settings or EngineSettings.from_env()  # for models loaded on demand
        self.config = config or ModelsConfig()
        self.keep_alive = keep_alive if self.config.defaults.keep_alive is None else self.config.defaults.keep_alive
        self.remotes = RemoteModels.from_config(self.config)  # models served elsewhere (edge_infer.remote)
        self.max_waiting, self.on_demand = max_waiting, on_demand
        self._models: list[Resident] = []        # loaded and loading, in load order
        self._known: dict[str, Resident] = {}    # every model loaded once: how to load it again
        self._default: str | None = None         # what a request without `model` gets
        self._cond, self._waiting, self._closed = threading.Condition(), 0, False
        self._reaper: threading.Thread | None = None
        self.evictions, self.failures = 0, Failures()  # failures: engine processes that ended (host/failures.py)

    # ---- loading -------------------------------------------------------------------------
    def load(self, spec: str | None, settings: EngineSettings | None = None, name: str | None = None,
             aliases: tuple[str, ...] = (), pin: bool = False) -> Resident:
        """Resolve `spec` (None = the catalog default, provisioned if missing), load it and
        make it the default model. Raises the store's or the engine's error; models already
        loaded stay unless the new one needs their room."""
        path, resolved = self._locate(spec)
        name = name or resolved
        template = self._template(Source(path, name, names_of(path, *aliases)), settings, pin)
        with self.acquire_template(template) as lease:
            self._default = lease.name
            return lease.resident

    def adopt(self, engine: ServedEngine, path: Path | str | None = None, settings: EngineSettings | None = None,
              name: str | None = None, aliases: tuple[str, ...] = ()) -> Resident:
        """Serve an engine built elsewhere (benchmarks, tests) as the default model; the host
        owns it from now on. A model of the same name is replaced."""
        path = Path(path or engine.model.path)
        name = name or engine.name or path.stem
        settings = settings or engine.settings  # the caller's word first (a double's are defaults)
        entry = Resident(name, path, settings, engine_footprint(engine),
                         names_of(path, *aliases) - {name},
                         keep_alive=self.keep_alive, engine=engine, loaded_at=time.time())
        with self._cond:
            gone = [m for m in self._models if m.name == name and m.engine is not engine]
            self._models = [m for m in self._models if m not in gone] + [entry]
            self._known[name] = entry
            self._default = name
        for m in gone:
            m.engine and m.engine.close()
        return entry

    def acquire(self, model: str | None = None, keep_alive: float | None = None,
                timeout: float | None = None) -> Lease:
        """A lease on the engine serving `model` (None: the default), loading it first if it
        is installed and not loaded. keep_alive (seconds; FOREVER; 0 = unload when done)
        applies from the moment the lease is released. Raises ModelNotLoadedError (unknown),
        ModelDoesNotFitError, HostBusyError, or the load's own error."""
        lease = self.try_acquire(model, keep_alive)
        if lease is not None:
            return lease
        template = self._template_for(model)
        return self.acquire_template(template, keep_alive, timeout)

    def try_acquire(self, model: str | None = None, keep_alive: float | None = None) -> Lease | None:
        """A lease when `model` is loaded now, else None; never blocks (the event loop's path)."""
        with self._cond:
            self._models = self.failures.take_failed(self._models)  # they load again below
            found = self._resident(model)
            if found is not None and found.engine is not None:
                return self._lease(found, keep_alive)
        return None

    def acquire_template(self, template: Resident, keep_alive: float | None = None,
                         timeout: float | None = None) -> Lease:
        deadline = None if timeout is None else time.monotonic() + timeout
        waited_on: Resident | None = None
        with self._cond:
            while True:
                if self._closed:
                    raise HostBusyError("the server is shutting down")
                if waited_on is not None and waited_on.error is not None:
                    raise waited_on.error  # the load this request waited for failed: same error, once
                self._models = self.failures.take_failed(self._models)
                entry = next((m for m in self._models if m.path == template.path), None)
                if entry is not None and entry.engine is not None:
                    return self._lease(entry, keep_alive)
                waited_on = entry
                if entry is None:
                    if not fits_alone(template.footprint, self.budget):
                        raise ModelDoesNotFitError(
                            f"{template.name} needs {template.footprint} by its memory plan; this server's "
                            f"budget for all models is {self.budget} (--models-budget, or a smaller --ctx/"
                            f"--parallel/--kv-budget for it in the models config)")
                    victims = choose_evictions(self._candidates(), template.footprint, self.budget)
                    if victims is not None:
                        break  # room now (after unloading `victims`): load it in this thread
                self._wait(deadline, template.name)  # it is loading, or all the room is busy
            gone = [m for m in self._models if m.name in victims]
            self._models = [m for m in self._models if m not in gone]
            entry = Resident(template.name, template.path, template.settings, template.footprint,
                             template.aliases, template.keep_alive, template.pinned)
            self._models.append(entry)
            self._known[entry.name] = template
            self.evictions += len(gone)
        for m in gone:  # unloaded before the new model allocates: the peak stays within the budget
            m.engine.close()
        return self._finish_load(entry, keep_alive)

    def _finish_load(self, entry: Resident, keep_alive: float | None) -> Lease:
        started = time.monotonic()
        try:
            engine = self._open_engine(entry.path, entry.settings, entry.name)
        except BaseException as exc:
            with self._cond:
                entry.error = exc
                self.failures.load_failed(entry.name, exc)
                self._models.remove(entry)
                self._cond.notify_all()
            raise
        with self._cond:
            if self._closed:
                engine.close()
                raise HostBusyError("the server is shutting down")
            # The engine's own plan: it applies defaults the template may not.
            entry.footprint = engine_footprint(engine)
            entry.engine, entry.loaded_at = engine, time.time()
            self.failures.pop(entry.name, None)
            entry.load_seconds = time.monotonic() - started
            if self._default is None:
                self._default = entry.name
            lease = self._lease(entry, keep_alive)
            self._cond.notify_all()
            return lease

    def _wait(self, deadline: float | None, name: str) -> None:
        if self._waiting >= self.max_waiting:
            raise HostBusyError(f"{self._waiting} requests already wait for a model to load or for room; "
                                f"try again shortly")
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise HostBusyError(f"{name} could not be loaded in time: the models holding the memory "
                                f"are busy; try again shortly")
        self._waiting += 1
        try:
            self._cond.wait(left)
        finally:
            self._waiting -= 1

    def _lease(self, entry: Resident, keep_alive: float | None) -> Lease:
        entry.active += 1
        entry.last_used = time.monotonic()
        entry.expires_at = math.inf
        return Lease(self._release, entry, keep_alive)

    def _release(self, lease: Lease) -> None:
        entry = lease.resident
        entry.footprint = engine_footprint(entry.engine)  # an embedding context may have come
        with self._cond:
            entry.active -= 1
            entry.last_used = now = time.monotonic()
            keep = entry.keep_alive if lease.keep_alive is None else lease.keep_alive
            if not entry.active and not entry.pinned:
                # min: an unload asked for while it was busy stays asked for
                entry.expires_at = min(entry.expires_at, math.inf if keep == FOREVER else now + keep)
                if entry.expires_at != math.inf:
                    self._start_reaper()
            self._cond.notify_all()  # a load waiting for room may go now

    def _candidates(self) -> list[Candidate]:
        return [Candidate(m.name, m.footprint, m.last_used, m.engine is not None and not m.pinned and m.idle())
                for m in self._models]

    # ---- names ---------------------------------------------------------------------------
    def _resident(self, model: str | None) -> Resident | None:
        models = self._models
        if model is None:
            return next((m for m in models if m.name == self._default), None)
        return next((m for m in models if m.answers_to(model)), None)

    def _template_for(self, model: str | None) -> Resident:
        return template_for(model, self._known, self._default, self._find_source if self.on_demand else None,
                            lambda source: self._template(source, None, False), self.names, self.servable_names)

    def _template(self, source: Source, settings: EngineSettings | None, pin: bool) -> Resident:
        budget_ram = self.budget.ram if self.budget.ram < unlimited().ram else None
        return resident_template(source, settings or self.settings, pin, self.config, self.keep_alive,
                                 self._footprint, budget_ram, on_demand=settings is None)

    # ---- finding -------------------------------------------------------------------------
    def get(self, model: str | None = None) -> ServedEngine:
        """The loaded engine serving `model` (None: the default one), without loading
        anything or holding it. ModelNotLoadedError if none."""
        found = self.find(model)
        if found is None:
            raise ModelNotLoadedError(model or "", self.names())
        return found.engine

    def find(self, model: str | None = None) -> Resident | None:
        found = self._resident(model)
        return found if found is not None and found.engine is not None else None

    def loaded(self) -> list[Resident]:
        return [m for m in self._models if m.engine is not None]

    def names(self) -> list[str]:
        return [m.name for m in self.loaded()]

    def servable_names(self) -> list[str]:
        return list(dict.fromkeys(self.names() + [s.name for s in self._sources()]))

    def entries(self, installed: bool = True) -> list[ModelEntry]:
        """Every model a request may name, local (loaded, loading, installed) then remote, one
        ModelEntry each (host/entries.py). installed=False: not the installed (no store read)."""
        local = local_entries(list(self._models), self._default, self._sources() if installed else [], self.failures)
        return local + remote_entries(self.remotes)

    def listing(self) -> list[dict]:
        """The local models' entries as dicts (ModelEntry.as_dict)."""
        return [e.as_dict() for e in self.entries() if e.kind == LOCAL]

    def _sources(self) -> list[Source]:
        """What requests may load besides the loaded models: the installed ones, when on demand."""
        return readable_sources(self._list_sources) if self.on_demand else []

    def used(self) -> Footprint:
        return sum((m.footprint for m in list(self._models)), Footprint(0))

    @property
    def current(self) -> Resident | None:
        """The default model: what the app chats with and a request without `model` gets."""
        return self.find(None)

    @property
    def ready(self) -> bool:
        return self.current is not None

    @property
    def description(self) -> str:
        return describe(self.current, len(self.loaded()))

    def set_default(self, model: str) -> None:
        found = self.find(model)
        if found is None:
            raise ModelNotLoadedError(model, self.names())
        self._default = found.name

    def pin(self, model: str, pinned: bool = True) -> None:
        with self._cond:
            found = self._resident(model)
            if found is None:
                raise ModelNotLoadedError(model, self.names())
            found.pinned = pinned
            if pinned:
                found.expires_at = math.inf

    # ---- freeing -------------------------------------------------------------------------
    def unload(self, model: str | None = None) -> bool:
        """Unload `model` (None: the default one): now when idle, else when its last request
        ends. False if it is not loaded."""
        with self._cond:
            found = self.find(model)
            if found is None:
                return False
            if not found.idle():
                found.pinned, found.expires_at = False, time.monotonic()
                self._start_reaper()
                return True
            self._models.remove(found)
        found.engine.close()
        return True

    def _start_reaper(self) -> None:
        if self._reaper is None:
            self._reaper = threading.Thread(target=self._reap, name="edge-infer-keep-alive", daemon=True)
            self._reaper.start()
        self._cond.notify_all()

    def _reap(self) -> None:
        reap(self._cond, lambda: self._closed, self._take_due)

    def _take_due(self, now: float) -> tuple[list[Resident], float]:
        """(idle models whose keep_alive ran out, taken off the host; when the next is due)."""
        due = [m for m in self._models if m.engine is not None and not m.pinned and m.expires_at <= now and m.idle()]
        self._models = [m for m in self._models if m not in due]
        return due, min((m.expires_at for m in self._models if m.expires_at != math.inf), default=math.inf)

    def close(self) -> None:
        self.remotes.close()
        with self._cond:
            self._closed = True
            gone, self._models = self._models, []
            self._cond.notify_all()
        for m in (m for m in gone if m.engine is not None):
            m.engine.close()

    def __enter__(self) -> "ModelHost":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
