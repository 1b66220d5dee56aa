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
