"""RPC workers for models loaded on demand. `serve MODEL --rpc A,B` names the workers for
MODEL, and other installed models loaded on request get them too. A worker that does not
answer must not block those: they load on the workers that answer (this machine alone when
none does) with one warning, and the memory budget then decides whether they fit. The
model the workers were named for (on the command line or in its models-config table) waits
for them: its requests get a 503 naming the worker until it is back."""

from __future__ import annotations

import logging
from dataclasses import replace

from edge_infer.config import EngineSettings
from edge_infer.errors import WorkerError

log = logging.getLogger("edge_infer.host")


def answering_workers(settings: EngineSettings, name: str) -> EngineSettings:
    """`settings` with only the workers that answer a probe now."""
    if not settings.rpc:
        return settings
    from edge_infer.engine.devices.rpc import probe  # not at import: the engine package loads llama.cpp

    alive = []
    for endpoint in settings.rpc:
        try:
            probe(endpoint)
        except WorkerError as exc:
            log.warning("%s: loading %s without it", exc, name)
            continue
        alive.append(endpoint)
    return settings if len(alive) == len(settings.rpc) else replace(settings, rpc=tuple(alive))
