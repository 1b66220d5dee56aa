"""How big the prompt caches are when the user does not say: sized to the machine.

RAM tier (--prompt-cache-mib, -1 = auto): a share of the RAM free when the model loads.
Measured (issue 36): 16 conversations of ~740 tokens over 4 slots of SmolLM2 need ~270 MiB;
the old fixed 128 MiB held five of them and a follow-up turn cost 19.75x a fresh prompt.
llama-server keeps up to 8 GiB (its --cache-ram default): the same ceiling here.

Disk tier (--disk-cache SIZE, "" = auto, "0" = off): a few GiB, never a large share of
the free disk (a laptop's disk may be nearly full).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from edge_infer.errors import EdgeInferError
from edge_infer.units import GiB, MiB, parse_size

AUTO_MIB = -1
RAM_SHARE = 0.10          # of the RAM available when the model loads
RAM_FLOOR = 256 * MiB     # a small machine still keeps a few conversations
RAM_CEILING = 8 * GiB     # as llama-server's --cache-ram
DISK_DEFAULT = 4 * GiB
DISK_SHARE = 0.10         # of the free disk at start, at most


def prompt_cache_bytes(mib: int, ram_available: int | None = None) -> int:
    """The RAM tier's cap: `mib` MiB as given, or (-1) a share of the available RAM."""
    if mib >= 0:
        return mib * MiB
    if mib != AUTO_MIB:
        raise EdgeInferError(f"--prompt-cache-mib {mib}: give MiB, 0 (off) or -1 (auto)")
    if ram_available is None:
        import psutil

        ram_available = psutil.virtual_memory().available
    share = int(ram_available * RAM_SHARE) // MiB * MiB
    return max(min(share, RAM_CEILING), min(RAM_FLOOR, ram_available // 4))


def disk_cache_bytes(setting: str, folder: Path, disk_free: int | None = None) -> int:
    """The disk tier's cap: a size as given ("2GiB"), 0 (off), or ("") a default that is at
    most a tenth of the disk free under `folder`."""
    text = (setting or "").strip()
    if text in ("0", "0b", "off"):
        return 0
    if text:
        try:
            return parse_size(text, "--disk-cache")
        except ValueError as exc:
            raise EdgeInferError(str(exc)) from None
    if disk_free is None:
        disk_free = _free_under(folder)
    return min(DISK_DEFAULT, int(disk_free * DISK_SHARE))


def _free_under(folder: Path) -> int:
    """Free bytes on the filesystem that holds (or will hold) `folder`."""
    for candidate in (folder, *folder.parents):
        try:
            return shutil.disk_usage(candidate).free
        except OSError:
            continue
    return 0
