"""Read what llama.cpp reports about its buffers at load time (from its log lines).

The memory plan is checked against these figures, and the Stats screen shows them.
"""

from __future__ import annotations

import re

from edge_infer.units import MiB

_KV = re.compile(r"KV buffer size\s*=\s*([\d.]+)\s*MiB")
_COMPUTE = re.compile(r"compute buffer size\s*=\s*([\d.]+)\s*MiB")
_MODEL = re.compile(r"(?:model|CPU_Mapped|CPU) buffer size\s*=\s*([\d.]+)\s*MiB")


def _sum(pattern: re.Pattern, lines: list[str]) -> int:
    return int(sum(float(m.group(1)) for line in lines for m in [pattern.search(line)] if m) * MiB)


def kv_bytes_reported(lines: list[str]) -> int:
    return _sum(_KV, lines)


def compute_bytes_reported(lines: list[str]) -> int:
    return _sum(_COMPUTE, lines)


def model_bytes_reported(lines: list[str]) -> int:
    return _sum(_MODEL, [l for l in lines if "KV" not in l and "compute" not in l])
