"""Installed models: one folder per model under the models dir, holding the GGUF
and a manifest.json written only after the file was verified.

    <root>/<alias>[-<quant>]/<file>.gguf
    <root>/<alias>[-<quant>]/manifest.json

A folder without a manifest is not a model (an interrupted install); names that
start with "." are temp files and wheels in flight and are never listed.
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from edge_infer import paths
from edge_infer.errors import ModelFileError, ModelNotFoundError
from edge_infer.store.catalog import Catalog, CatalogModel, load_catalog
from edge_infer.store.gguf_info import read_model_info
from edge_infer.store.mirror import open_private_temp, provision_from_mirror

log = logging.getLogger(__name__)
MANIFEST = "manifest.json"
SOURCES = ("mirror", "hub", "import")


@dataclass(frozen=True)
class InstalledModel:
    alias: str | None
    name: str
    repo: str | None
    quant: str
    file: str
    size: int
    sha256: str | None
    source: str
    installed_at: str
    path: Path

    @property
    def label(self) -> str:
        """What a user types to pick this model: alias:QUANT, else name:QUANT."""
        return f"{self.alias or self.name}:{self.quant}"

    def to_dict(self) -> dict:
        out = asdict(self)
        out["path"] = str(self.path)
        return out


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9._-]+", "-", text.lower()).strip("-.") or "model"


def looks_like_path(spec: str) -> bool:
    """Unambiguously a path. Hub repos ("owner/name") contain a slash and an installed
    file may be named bare ("x.gguf"), so resolve() tries model names for the rest."""
    if spec.startswith(("~", ".", os.sep)) or Path(spec).exists():
        return True
    return spec.lower().endswith(".gguf") and (os.sep in spec or "/" in spec)


class ModelStore:
    def __init__(self, root: str | os.PathLike | None = None, catalog: Catalog | None = None):
        self.root = Path(root) if root is not None else paths.models_dir()
        self._catalog = catalog

    @property
    def catalog(self) -> Catalog:
        if self._catalog is None:
            self._catalog = load_catalog()
        return self._catalog

    # -- listing -------------------------------------------------------------

    def installed(self) -> list[InstalledModel]:
        models = []
        if not self.root.is_dir():
            return models
        for folder in sorted(self.root.iterdir()):
            if folder.name.startswith(".") or not (folder / MANIFEST).is_file():
                continue
            model = self._read_manifest(folder)
            if model is not None:
                models.append(model)
        return models

    def _read_manifest(self, folder: Path) -> InstalledModel | None:
        try:
            data = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
            model = InstalledModel(
                alias=data.get("alias"), name=data["name"], repo=data.get("repo"),
                quant=data["quant"], file=data["file"], size=int(data["size"]),
                sha256=data.get("sha256"), source=data.get("source", "import"),
                installed_at=data.get("installed_at", ""), path=folder / data["file"],
            )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring unreadable manifest in %s: %s", folder, exc)
            return None
        if not model.path.is_file():
            log.warning("ignoring %s: its manifest names a missing file", folder)
            return None
        return model

    def find(self, spec: str) -> InstalledModel | None:
        """Match alias, alias:QUANT, repo, repo:QUANT, model name or folder name."""
        base, _, quant = spec.partition(":")
        base = base.lower()
        matches = [
            m for m in self.installed()
            if base in {(m.alias or "").lower(), (m.repo or "").lower(), m.name.lower(),
                        m.path.parent.name.lower(), m.file.lower()}
            and (not quant or m.quant.lower() == quant.lower())
        ]
        if not matches:
            return None
        # Several quants of one model and no quant asked for: the catalog default, else newest.
        defaults = {(c.alias, c.default_quant.lower()) for c in self.catalog}
        matches.sort(key=lambda m: ((m.alias, m.quant.lower()) in defaults, m.installed_at))
        return matches[-1]

    # -- installing ----------------------------------------------------------

    def folder_for(self, model: CatalogModel, quant: str) -> Path:
        same = quant.lower() == model.default_quant.lower()
        return self.root / _slug(model.alias if same else f"{model.alias}-{quant}")

    def lookup(self, alias: str, quant: str | None = None) -> InstalledModel | None:
        """The installed copy of a catalog model, trusted by its manifest (no re-hash),
        provided the file still has the verified size."""
        model, entry = self._catalog_entry(alias, quant)
        folder = self.folder_for(model, entry.quant)
        if not (folder / MANIFEST).is_file():
            return None
        found = self._read_manifest(folder)
        if found and found.sha256 == entry.sha256 and found.path.stat().st_size == entry.size:
            return found
        return None

    def ensure(self, alias: str, quant: str | None = None,
               progress: Callable[[str], object] = print) -> Path:
        """Path of the catalog model, provisioning it from its mirror only if missing."""
        found = self.lookup(alias, quant)
        if found:
            return found.path
        model, entry = self._catalog_entry(alias, quant)
        folder = self.folder_for(model, entry.quant)
        path = provision_from_mirror(model, entry.quant, dest_dir=folder, progress=progress)
        self.record(path, alias=model.alias, name=model.name, repo=model.repo, quant=entry.quant,
                    sha256=entry.sha256, source="mirror")
        return path

    def record(self, path: Path, *, name: str, quant: str, source: str, alias: str | None = None,
               repo: str | None = None, sha256: str | None = None) -> InstalledModel:
        """Write the manifest for a verified file already in its folder (atomically)."""
        if source not in SOURCES:
            raise ValueError(f"source must be one of {SOURCES}")
        path = Path(path)
        data = {
            "alias": alias, "name": name, "repo": repo, "quant": quant, "file": path.name,
            "size": path.stat().st_size, "sha256": sha256, "source": source,
            "installed_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        tmp = path.parent / f".{MANIFEST}.{os.getpid()}.tmp"
        try:
            with open_private_temp(tmp, "w", encoding="utf-8") as fh:
                json.dump(data, fh, indent=2)
                fh.write("\n")
            os.replace(tmp, path.parent / MANIFEST)
        finally:
            Path(tmp).unlink(missing_ok=True)
        return self._read_manifest(path.parent)

    def _catalog_entry(self, alias: str, quant: str | None):
        base, _, spec_quant = alias.partition(":")
        model = self.catalog.get(base)
        if model is None:
            raise ModelNotFoundError(
                f"{base!r} is not in the model catalog; known models: {', '.join(self.catalog.aliases())}")
        return model, model.file_for(quant or spec_quant or None)

    # -- resolving -----------------------------------------------------------

    def resolve(self, spec: str) -> Path:
        """A user's MODEL argument -> a validated GGUF path. Never touches the network."""
        if looks_like_path(spec):
            path = Path(spec).expanduser()
            read_model_info(path)  # raises ModelFileError with the reason
            return path
        found = self.find(spec)
        if found:
            if found.path.stat().st_size != found.size:
                hint = f"edge-infer provision {found.alias}" if found.alias else "install it again"
                raise ModelFileError(
                    f"installed model {found.label} is damaged: {found.path} has "
                    f"{found.path.stat().st_size} bytes, its manifest says {found.size}; run `{hint}`")
            return found.path
        model = self.catalog.match(spec)
        if model is not None:
            quant = spec.partition(":")[2]
            if quant and not any(q.lower() == quant.lower() for q in model.files):
                raise ModelNotFoundError(
                    f"{model.alias} has no quant {quant!r} in the catalog "
                    f"(available: {', '.join(model.files)})")
            entry = model.file_for(quant or None)
            raise ModelNotFoundError(
                f"model {spec!r} ({model.name}, {entry.quant}) is in the catalog but not installed; "
                f"run `edge-infer provision {model.alias}:{entry.quant}` first")
        if spec.lower().endswith(".gguf"):
            read_model_info(Path(spec))  # a file name after all: raises "no such model file"
        installed = ", ".join(m.label for m in self.installed()) or "none"
        not_file = " (and no such file)" if os.sep in spec or "/" in spec else ""
        raise ModelNotFoundError(
            f"unknown model {spec!r}{not_file}. Installed: {installed}. "
            f"In the catalog: {', '.join(self.catalog.aliases())}. Or pass a path to a .gguf file.")
