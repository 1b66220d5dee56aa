"""How the host will load a name: the file, the served name and its other names, the
engine settings (the server's, with the models config's table for it over them), the
memory plan, keep_alive and pin. A template becomes a Resident when it loads."""

from __future__ import annotations

from edge_infer.config import EngineSettings
from edge_infer.host.errors import ModelNotLoadedError
from edge_infer.host.resident import Resident
from edge_infer.host.sources import Source


def template_for(host, model: str | None) -> Resident:
    if model is None:
        known = host._known.get(host._default) if host._default else None
        if known is None:
            raise ModelNotLoadedError("", host.names())
        return known
    known = next((k for k in host._known.values() if k.answers_to(model)), None)
    if known is not None:
        return known
    source = host._find_source(model) if host.on_demand else None
    if source is None:
        raise ModelNotLoadedError(model, host.servable_names())
    return template(host, source, None, False)


def template(host, source: Source, settings: EngineSettings | None, pin: bool) -> Resident:
    entry = host.config.entry_for(source.name, *sorted(source.aliases))
    settings = settings or host.settings
    if entry is not None:
        settings = entry.apply(settings)
    keep = entry.keep_alive if entry is not None and entry.keep_alive is not None else host.keep_alive
    return Resident(source.name, source.path, settings, host._footprint(source.path, settings),
                    source.aliases - {source.name}, keep, pin or bool(entry and entry.pin))
