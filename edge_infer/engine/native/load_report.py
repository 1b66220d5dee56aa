"""Read what llama.cpp reports about its KV buffers at load time (from its log lines):
the engine's snapshot shows the KV bytes llama.cpp allocated, not the plan's estimate."""

from __future__ import annotations

import re

from edge_infer.units import MiB

_KV = re.compile(r"KV buffer size\s*=\s*([\d.]+)\s*MiB")


def _sum(pattern: re.Pattern, lines: list[str]) -> int:
    return int(sum(float(m.group(1)) for line in lines for m in [pattern.search(line)] if m) * MiB)


def kv_bytes_reported(lines: list[str]) -> int:
    return _sum(_KV, lines)


# "load_tensors:      Vulkan0 model buffer size =    92.10 MiB", "... CUDA0 KV buffer size", ...
# An RPC worker's buffers name its endpoint: "RPC0[192.168.1.20:50052] model buffer size" (every
# worker's device is RPC0 on its own server): keyed "rpc:ENDPOINT", the device's description.
_BUFFER = re.compile(r"\b([\w.-]+(?:\[[^\]\s]+\])?) (model|KV|compute|RS) buffer size\s*=\s*([\d.]+)\s*MiB")
_RPC = re.compile(r"^RPC\d+\[(.+)\]$")
# Host-side buffers: CPU RAM whatever device they serve (mapped weights, repacked weights,
# pinned staging buffers of a GPU backend).
_HOST = re.compile(r"^(CPU|AMX|KLEIDIAI)(_\w+)?$|_Host$")


def device_buffers(lines: list[str]) -> dict[str, dict[str, int]]:
    """llama.cpp's own report of its buffers at load, by device: {"Vulkan0": {"model": n,
    "KV": n, "compute": n}, "CPU": {...}}; host buffers (CPU_Mapped, Vulkan_Host, ...) count as CPU."""
    found: dict[str, dict[str, int]] = {}
    for line in lines:
        for name, kind, mib in _BUFFER.findall(line):
            rpc = _RPC.match(name)
            device = f"rpc:{rpc.group(1)}" if rpc else "CPU" if _HOST.search(name) else name
            kinds = found.setdefault(device, {})
            kinds[kind] = kinds.get(kind, 0) + int(float(mib) * MiB)
    return found
