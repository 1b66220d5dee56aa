"""How the host will load a name: the file, the served name and its other names, the
engine settings (the server's, with the models config's table for it over them), the
memory plan, keep_alive and pin. A template becomes a Resident when it loads."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Callable

from edge_infer.config import EngineSettings
from edge_infer.host.errors import ModelNotLoadedError
from edge_infer.host.model_config import ModelsConfig
from edge_infer.host.residency import Footprint
from edge_infer.host.resident import Resident
from edge_infer.host.sources import Source
from edge_infer.host.workers import answering_workers
from edge_infer.plan.cache_sizes import AUTO_MIB, prompt_cache_bytes
from edge_infer.units import MiB


def template_for(model: str | None, known: dict[str, Resident], default: str | None,
                 find_source: Callable[[str], Source | None] | None, make: Callable[[Source], Resident],
                 names: Callable[[], list[str]], servable_names: Callable[[], list[str]]) -> Resident:
    """The template for `model` (None: the default): one loaded before, else an installed
    source (find_source: None when the host loads nothing on demand)."""
    if model is None:
        found = known.get(default) if default else None
        if found is None:
            raise ModelNotLoadedError("", names())
        return found
    found = next((k for k in known.values() if k.answers_to(model)), None)
    if found is not None:
        return found
    source = find_source(model) if find_source is not None else None
    if source is None:
        raise ModelNotLoadedError(model, servable_names())
    return make(source)


def resident_template(source: Source, settings: EngineSettings, pin: bool, config: ModelsConfig, keep_alive: float,
             footprint: Callable[[Path, EngineSettings], Footprint], budget_ram: int | None = None,
             on_demand: bool = False) -> Resident:
    """settings: the host's (for models loaded on demand) unless the load named its own; the
    models config's table for the model goes over them. An auto prompt cache becomes a share
    of the models budget (`budget_ram`; None: of the RAM available), so a small budget still
    holds the model it was given for. A model loaded on demand uses the server's RPC workers
    that answer: a lost one blocks only the models it was named for (host/workers.py)."""
    entry = config.entry_for(source.name, *sorted(source.aliases))
    if entry is not None:
        settings = entry.apply(settings)
    if on_demand and not (entry is not None and entry.rpc):
        settings = answering_workers(settings, source.name)
    if settings.prompt_cache_mib == AUTO_MIB:
        settings = replace(settings, prompt_cache_mib=prompt_cache_bytes(AUTO_MIB, budget_ram) // MiB)
    keep = entry.keep_alive if entry is not None and entry.keep_alive is not None else keep_alive
    return Resident(source.name, source.path, settings, footprint(source.path, settings),
                    source.aliases - {source.name}, keep, pin or bool(entry and entry.pin))
