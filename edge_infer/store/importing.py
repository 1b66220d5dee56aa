"""`edge-infer import FILE`: a local GGUF (every shard of a split one) copied into the
store with its sha256 and recorded like any installed model."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Callable

from edge_infer.errors import ModelFileError
from edge_infer.gguf.info import read_model_info, split_paths
from edge_infer.gguf.quant_types import model_stem, quant_from_filename
from edge_infer.store.mirror import open_private_temp
from edge_infer.store.store import MANIFEST, InstalledModel, ModelStore


def import_file(store: ModelStore, source: str | os.PathLike, *, name: str | None = None,
                quant: str | None = None, move: bool = False,
                progress: Callable[[str], object] = print) -> InstalledModel:
    """Validate a local GGUF (every shard of a split one), copy it into the store with
    its sha256, and record it. The copy goes to a hidden temp name first."""
    source = Path(source).expanduser()
    info = read_model_info(source)  # ModelFileError: not GGUF, truncated, missing shard
    shards = split_paths(source)
    quant = quant or quant_from_filename(source.name) or info.quantization
    name = name or model_stem(source.name)
    folder = store.folder_for_name(name, quant)
    if (folder / MANIFEST).is_file():
        existing = store.read_manifest(folder)
        if existing is not None:
            raise ModelFileError(f"{existing.label} is already installed ({existing.path}); "
                                 f"`edge-infer rm {existing.label}` first, or pass --name")
    folder.mkdir(parents=True, exist_ok=True)
    parts = []
    for shard in shards:
        target = folder / shard.name
        tmp = folder / f".{shard.name}.{os.getpid()}.part"
        progress(f"{'moving' if move else 'copying'} {shard} ({shard.stat().st_size / 2**20:.1f} MiB)")
        try:
            digest = hashlib.sha256()
            with open(shard, "rb") as src, open_private_temp(tmp, "wb") as out:
                while chunk := src.read(1 << 22):
                    digest.update(chunk)
                    out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
        parts.append((shard.name, target.stat().st_size, digest.hexdigest()))
    read_model_info(folder / shards[0].name)
    model = store.record(folder / shards[0].name, name=name, quant=quant, source="import",
                        sha256=parts[0][2], parts=parts)
    if move:
        for shard in shards:
            shard.unlink(missing_ok=True)
    return model
