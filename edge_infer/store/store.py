"""Installed models: one folder per model under the models dir, holding the GGUF
and a manifest.json written only after the file was verified.

    <root>/<alias>[-<quant>]/<file>.gguf
    <root>/<alias>[-<quant>]/manifest.json

A folder without a manifest is not a model (an interrupted install); names that
start with "." are temp files, wheels and downloads in flight (`.partial/`) and are
never listed. A split model keeps all its shards in its folder; the manifest names
the first (what llama.cpp opens) and lists every part with its size and sha256.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from edge_infer import paths
from edge_infer.errors import ModelFileError, ModelNotFoundError
from edge_infer.store.catalog import Catalog, CatalogModel, load_catalog
from edge_infer.gguf.info import read_model_info
from edge_infer.store.mirror import open_private_temp, provision_from_mirror

log = logging.getLogger(__name__)
MANIFEST = "manifest.json"
SOURCES = ("mirror", "hub", "import", "quantize")


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
    path: Path                      # the file llama.cpp opens (first shard of a split model)
    revision: str | None = None     # hub commit the file came from
    parts: tuple[tuple[str, int, str | None], ...] = ()   # (file, size, sha256) of every shard
    derived_from: str | None = None  # quantize: the label of the model it was made from

    @property
    def family(self) -> str:
        """Which model this is a quant level of: catalog alias, else hub repo, else name."""
        return self.alias or self.repo or self.name

    @property
    def label(self) -> str:
        """What a user types to pick this model: alias:QUANT, else repo:QUANT, else name:QUANT."""
        return f"{self.family}:{self.quant}"

    @property
    def files(self) -> list[tuple[Path, int]]:
        """(path, expected size) of every file of this model."""
        if self.parts:
            return [(self.path.parent / name, size) for name, size, _ in self.parts]
        return [(self.path, self.size)]

    def to_dict(self) -> dict:
        out = asdict(self)
        out["path"] = str(self.path)
        out["parts"] = [list(p) for p in self.parts]
        out["label"] = self.label
        return out


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9._-]+", "-", text.lower()).strip("-.") or "model"


def safe_file_name(name: str) -> bool:
    """A plain file name: no folder part on any OS (/, \\, a drive's :), not '.' or '..', no NUL."""
    return bool(name) and name not in (".", "..") and not any(c in name for c in "/\\:\x00")


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
            model = self.read_manifest(folder)
            if model is not None:
                models.append(model)
        return models

    def read_manifest(self, folder: Path) -> InstalledModel | None:
        try:
            data = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
            model = InstalledModel(
                alias=data.get("alias"), name=data["name"], repo=data.get("repo"),
                quant=data["quant"], file=data["file"], size=int(data["size"]),
                sha256=data.get("sha256"), source=data.get("source", "import"),
                installed_at=data.get("installed_at", ""), path=folder / data["file"],
                revision=data.get("revision"),
                parts=tuple((str(p["file"]), int(p["size"]), p.get("sha256")) for p in data.get("parts") or ()),
                derived_from=data.get("derived_from"),
            )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring unreadable manifest in %s: %s", folder, exc)
            return None
        # A manifest names files in its own folder, nothing else: not "../x" (a shared or
        # copied store must not point a server at arbitrary files). Links the user made
        # (a big file kept on another disk) are followed.
        names = [model.file, *(p for p, _, _ in model.parts)]
        if not all(safe_file_name(n) for n in names):
            log.warning("ignoring %s: its manifest names a file outside its folder", folder)
            return None
        if not all(p.is_file() for p, _ in model.files):
            log.warning("ignoring %s: its manifest names a missing file", folder)
            return None
        return model

    def matches(self, spec: str, installed: list[InstalledModel] | None = None) -> list[InstalledModel]:
        """Every installed model `spec` names (alias, repo, name, folder or file, with or
        without :QUANT); `installed`: a listing already read."""
        base, _, quant = spec.partition(":")
        base = base.lower()
        return [
            m for m in (self.installed() if installed is None else installed)
            if base in {(m.alias or "").lower(), (m.repo or "").lower(), m.name.lower(),
                        m.path.parent.name.lower(), m.file.lower()}
            and (not quant or m.quant.lower() == quant.lower())
        ]

    def family(self, model: InstalledModel) -> list[InstalledModel]:
        """Every installed quant level of the same model, highest precision first."""
        from edge_infer.gguf.quant_types import precision_key

        same = [m for m in self.installed() if m.family.lower() == model.family.lower()]
        return sorted(same, key=lambda m: precision_key(m.quant), reverse=True)

    def find(self, spec: str, installed: list[InstalledModel] | None = None) -> InstalledModel | None:
        """Match alias, alias:QUANT, repo, repo:QUANT, model name or folder name."""
        matches = self.matches(spec, installed)
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
        found = self.read_manifest(folder)
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

    def folder_for_repo(self, repo: str, quant: str) -> Path:
        """<root>/<owner>--<name>-<quant> for a hub model that is not in the catalog."""
        return self.root / _slug(f"{repo.replace('/', '--')}-{quant}")

    def folder_for_name(self, name: str, quant: str) -> Path:
        return self.root / _slug(f"{name}-{quant}")

    def folder_for_model(self, model: InstalledModel, quant: str) -> Path:
        """Where another quant level of an installed model goes (quantize)."""
        if model.alias:
            entry = self.catalog.get(model.alias)
            if entry is not None:
                return self.folder_for(entry, quant)
        if model.repo:
            return self.folder_for_repo(model.repo, quant)
        return self.folder_for_name(model.name, quant)

    def record(self, path: Path, *, name: str, quant: str, source: str, alias: str | None = None,
               repo: str | None = None, sha256: str | None = None, revision: str | None = None,
               parts: list[tuple[str, int, str | None]] | None = None,
               derived_from: str | None = None) -> InstalledModel:
        """Write the manifest for verified file(s) already in their folder (atomically).
        `parts` lists every shard of a split model, the first being `path`."""
        if source not in SOURCES:
            raise ValueError(f"source must be one of {SOURCES}")
        path = Path(path)
        size = sum(p[1] for p in parts) if parts else path.stat().st_size
        data = {
            "alias": alias, "name": name, "repo": repo, "quant": quant, "file": path.name,
            "size": size, "sha256": sha256, "source": source,
            "installed_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        if revision:
            data["revision"] = revision
        if parts and len(parts) > 1:
            data["parts"] = [{"file": f, "size": n, "sha256": h} for f, n, h in parts]
        if derived_from:
            data["derived_from"] = derived_from
        tmp = path.parent / f".{MANIFEST}.{os.getpid()}.tmp"
        try:
            with open_private_temp(tmp, "w", encoding="utf-8") as fh:
                json.dump(data, fh, indent=2)
                fh.write("\n")
            os.replace(tmp, path.parent / MANIFEST)
        finally:
            Path(tmp).unlink(missing_ok=True)
        return self.read_manifest(path.parent)

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
            for part, size in found.files:
                if part.stat().st_size != size:
                    hint = (f"edge-infer provision {found.alias}" if found.alias and found.source == "mirror"
                            else f"edge-infer rm {found.label}` and install it again (`edge-infer pull`")
                    raise ModelFileError(
                        f"installed model {found.label} is damaged: {part} has "
                        f"{part.stat().st_size} bytes, its manifest says {size}; run `{hint}`")
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
        hub = (f" From the hub: `edge-infer pull {spec}`." if spec.count("/") == 1 and not spec.startswith(("/", "."))
               else "")
        raise ModelNotFoundError(
            f"unknown model {spec!r}{not_file}. Installed: {installed}. "
            f"In the catalog: {', '.join(self.catalog.aliases())}. Or pass a path to a .gguf file.{hub}")

    def locate(self, spec: str | None, progress: Callable[[str], object] = print) -> tuple[Path, str]:
        """A MODEL argument -> (path, the name it is served and shown as). None is the
        catalog's default model, provisioned from its mirror if missing."""
        if spec is None:
            default = self.catalog.default()
            return self.ensure(default.alias, progress=progress), default.alias
        path = self.resolve(spec)
        # A file given by path is named by its stem (what /v1/models lists); store names stay.
        return path, (Path(spec).stem if looks_like_path(spec) else spec)

    # -- removing -----------------------------------------------------------------

    def remove(self, model: InstalledModel) -> None:
        """Delete an installed model: its manifest first (from then on it is not a model),
        then its folder."""
        folder = model.path.parent
        if folder.parent.resolve() != self.root.resolve() or not (folder / MANIFEST).is_file():
            raise ModelNotFoundError(f"{folder} is not a model folder of the store {self.root}")
        (folder / MANIFEST).unlink()
        shutil.rmtree(folder, ignore_errors=True)
