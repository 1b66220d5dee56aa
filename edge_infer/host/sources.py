"""Which models a request may name: the installed ones (by name, alias, alias:QUANT, repo,
folder or file), never a path a client sends. Name -> (file, served name, other names)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable


@dataclass(frozen=True)
class Source:
    path: Path
    name: str                     # served as
    aliases: frozenset[str] = frozenset()
    size: int = 0                 # file bytes (listing only)


def names_of(path: Path, *extra: str) -> frozenset[str]:
    """What clearly means this file besides its served name."""
    return frozenset({path.stem, path.name, *(e for e in extra if e)})


def installed_sources() -> list[Source]:
    """Every installed model, named as `edge-infer list` shows them: the family (alias,
    repo or name) for the quant a bare family name picks, family:QUANT for the others."""
    from edge_infer.store.store import ModelStore

    store = ModelStore()
    return _sources(store, store.installed())


def _sources(store, installed) -> list[Source]:
    out = []
    for m in installed:  # one reading of the manifests: listing runs every second in the TUI
        chosen = store.find(m.family, installed)
        name = m.family if chosen is not None and chosen.path == m.path else m.label
        out.append(Source(m.path, name, names_of(m.path, m.label, m.family if name == m.family else "",
                                                   m.name if name == m.family else "", m.path.parent.name),
                          m.size))
    return out


def readable_sources(list_sources: Callable[[], list[Source]]) -> list[Source]:
    """list_sources(), or none when the store cannot be read: the loaded models still list."""
    try:
        return list_sources()
    except Exception:
        return []


def find_installed(spec: str) -> Source | None:
    """The installed model `spec` names, or None. Paths are not names: a client may not
    make the server open a file of its choosing."""
    from edge_infer.store.store import ModelStore, looks_like_path

    if len(spec) > 512 or "\x00" in spec or looks_like_path(spec):
        return None
    store = ModelStore()
    installed = store.installed()
    found = store.find(spec, installed)
    if found is None:
        return None
    return next((s for s in _sources(store, installed) if s.path == found.path),
                Source(found.path, found.label, names_of(found.path, found.label), found.size))
