"""The prompt cache's two tiers for one engine: RAM (engine/prompt_cache.py) and, under it,
disk (engine/disk_cache.py), sized by plan/cache_sizes.py when the settings say auto."""

from __future__ import annotations

from pathlib import Path

import llama_cpp

from edge_infer.config import EngineSettings
from edge_infer.engine.disk_cache import DiskCache
from edge_infer.engine.kv_file import StateKey
from edge_infer.engine.prompt_cache import PromptCache
from edge_infer.paths import kv_cache_dir
from edge_infer.plan.cache_sizes import disk_cache_bytes, prompt_cache_bytes


def state_key(model_path: Path, settings: EngineSettings, identity: str | None) -> StateKey:
    """What a saved state is valid for. Without a manifest's sha256, the file's size and
    modification time stand for its identity (a replaced file changes them)."""
    real = Path(model_path).resolve()
    if identity:
        identity = f"sha256={identity}"
    else:
        st = real.stat()
        identity = f"size={st.st_size} mtime_ns={st.st_mtime_ns}"
    layout = (f"k={settings.cache_type_k} v={settings.cache_type_v} fa={settings.flash_attn} "
              f"swa_full={int(settings.swa_full)} llama_cpp={llama_cpp.__version__}")
    return StateKey(model=str(real), model_id=identity, layout=layout)


def build_tiers(model_path: Path, settings: EngineSettings, identity: str | None) -> tuple[PromptCache, DiskCache]:
    ram = PromptCache(prompt_cache_bytes(settings.prompt_cache_mib))
    folder = kv_cache_dir()
    disk = DiskCache(folder, disk_cache_bytes(settings.disk_cache, folder), state_key(model_path, settings, identity))
    return ram, disk
