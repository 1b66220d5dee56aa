"""Slots (llama.cpp sequence ids) and the KV cells they hold in the shared pool.

Pure bookkeeping, mirrored from what llama.cpp's cache holds, so the scheduler can count
free cells without asking llama.cpp (and be unit-tested without it).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from edge_infer.engine.sequence import Sequence

_cell_ids = itertools.count()


@dataclass
class Slot:
    id: int
    cached: list[int] = field(default_factory=list)  # tokens at positions 0..len-1 in the KV cache
    # Which KV cell holds each of those positions, in our own numbering: a shared prefix
    # shares numbers, so the distinct numbers over all slots count the cells in use.
    cells: list[int] = field(default_factory=list)
    seq: Sequence | None = None
    last_used: int = 0

    def extend(self, tokens: list[int]) -> None:
        self.cached.extend(tokens)
        self.cells.extend(itertools.islice(_cell_ids, len(tokens)))

    def trim(self, n: int) -> None:
        del self.cached[n:]
        del self.cells[n:]

    def share(self, donor: "Slot", n: int) -> None:
        self.cached[:] = donor.cached[:n]
        self.cells[:] = donor.cells[:n]

    def restored(self, tokens) -> None:
        """The slot now holds a saved state of these tokens (new cells of its own)."""
        self.trim(0)
        self.extend(list(tokens))


def cells_in_use(slots: list[Slot]) -> int:
    """KV cells holding something, shared ones once (safe from another thread: copies first)."""
    return len(set().union(*(list(s.cells) for s in slots)))


def common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i
