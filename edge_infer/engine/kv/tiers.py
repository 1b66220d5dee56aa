"""The prompt cache's two tiers for one engine: RAM (kv/ram_tier.py) and, under it, disk
(kv/disk_tier.py), sized by plan/cache_sizes.py when the settings say auto.

TieredCache is the only code that knows there are two: the KV pool asks it for a saved
prefix (peek), takes one back (take), hands it what a slot is about to lose (put), and at
close has it write everything to disk (persist). What the RAM tier lets go spills to disk.
Engine thread only (the disk tier writes on its own thread).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from edge_infer.config import EngineSettings
from edge_infer.engine.kv.disk_tier import DiskCache
from edge_infer.engine.kv.kv_file import StateKey
from edge_infer.engine.kv.ram_tier import PromptCache
from edge_infer.engine.native.llama import llama_cpp_version
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
              f"swa_full={int(settings.swa_full)} llama_cpp={llama_cpp_version()}")
    return StateKey(model=str(real), model_id=identity, layout=layout)


@dataclass(frozen=True)
class Saved:
    """A saved prefix taken from a tier: the tokens its KV `data` holds, and where it was."""
    tokens: tuple[int, ...]
    data: bytes | bytearray
    from_disk: bool


class TieredCache:
    def __init__(self, ram: PromptCache, disk: DiskCache | None = None):
        self.ram, self.disk = ram, disk
        if disk is not None:  # what the RAM tier lets go goes to disk
            ram.on_evict = lambda entry: disk.put(entry.tokens, entry.data)

    @classmethod
    def for_model(cls, model_path: Path, settings: EngineSettings, identity: str | None) -> "TieredCache":
        folder = kv_cache_dir()
        disk = DiskCache(folder, disk_cache_bytes(settings.disk_cache, folder),
                         state_key(model_path, settings, identity))
        return cls(PromptCache(prompt_cache_bytes(settings.prompt_cache_mib)), disk)

    @property
    def _disk_on(self) -> bool:
        return self.disk is not None and self.disk.enabled

    @property
    def cap_bytes(self) -> int:
        """The largest state either tier would keep (0: saving is pointless)."""
        return max(self.ram.cap_bytes, self.disk.counters.cap_bytes if self._disk_on else 0)

    def peek(self, tokens) -> int:
        """The longest saved prefix of `tokens`, in RAM or on disk; changes nothing."""
        return max(self.ram.peek(tokens), self.disk.peek(tokens) if self.disk else 0)

    def take(self, tokens) -> Saved | None:
        """The saved state that gives `tokens` the longest prefix, from the tier that has it
        (the RAM entry is removed: it lives in a slot again)."""
        if self.disk is not None and self.disk.peek(tokens) > self.ram.peek(tokens):
            found = self.disk.load(tokens)
            return Saved(found[0], found[1], True) if found else None
        entry = self.ram.take(tokens)
        return Saved(entry.tokens, entry.data, False) if entry else None

    def put(self, tokens, data: bytes | bytearray) -> None:
        """Keep a state: in RAM, or straight on disk when it is too large for the RAM tier."""
        if not self.ram.put(tokens, data) and self._disk_on:
            self.disk.put(tokens, data)

    def restored_from_disk(self, started: float) -> None:
        """Count the time a disk restore took (read, check, llama.cpp's copy)."""
        self.disk.counters.restore_seconds += time.perf_counter() - started

    def persist(self, slot_states: Iterable[tuple[list[int], Callable[[int], bytes | bytearray | None]]]) -> None:
        """At close: write every conversation to disk, the slots' (their tokens, and how to
        save their state within a size) and the RAM tier's, skipping what disk holds."""
        if not self._disk_on:
            return
        for tokens, save in slot_states:
            if not self.disk.holds(tokens):
                data = save(self.disk.counters.cap_bytes)
                if data is not None:
                    self.disk.put(tokens, data, wait=True)
        for entry in self.ram.entries():
            if not self.disk.holds(entry.tokens):
                self.disk.put(entry.tokens, entry.data, wait=True)

    def close(self) -> None:
        if self.disk is not None:
            self.disk.close()
