"""The host's default seams: how a MODEL argument is found, how an engine is opened, and
the budget when none is given. Tests pass their own (ollama's sched.go style)."""

from __future__ import annotations

from pathlib import Path

from edge_infer.config import EngineSettings
from edge_infer.host.residency import Budget


def open_engine(path: Path, settings: EngineSettings, name: str):
    if settings.rpc:  # on other machines' workers: in a child process (engine/child.py)
        from edge_infer.engine.child import ChildEngine

        return ChildEngine(path, settings, name=name, identity=model_identity(path))
    from edge_infer.engine import Engine  # loads llama.cpp: only when a model is loaded

    return Engine(path, settings, name=name, identity=model_identity(path))


def model_identity(path: Path) -> str | None:
    """The sha256 the store's manifest records for this file (None outside the store): the
    disk tier keys saved conversations by it, so a replaced model never restores old ones."""
    from edge_infer.store.store import MANIFEST, ModelStore

    if not (path.parent / MANIFEST).is_file():
        return None
    model = ModelStore(path.parent.parent).read_manifest(path.parent)
    if model is None or model.path.resolve() != Path(path).resolve():
        return None
    return model.sha256 or None


def locate_model(spec: str | None) -> tuple[Path, str]:
    import sys

    from edge_infer.store.store import ModelStore

    # Provisioning messages go to stderr: a command's stdout carries the model's text.
    return ModelStore().locate(spec, progress=lambda line: print(line, file=sys.stderr))


def unlimited() -> Budget:
    return Budget(ram=1 << 62, vram=1 << 62)
