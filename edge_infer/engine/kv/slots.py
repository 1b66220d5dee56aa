"""Slots (llama.cpp sequence ids) and the KV cells they hold in the shared pool.

Pure bookkeeping, mirrored from what llama.cpp's cache holds, so the scheduler can count
free cells without asking llama.cpp (and be unit-tested without it). The count is kept as
it changes (CellLedger), not recounted: the engine asks for it on every step.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Protocol


class Occupant(Protocol):
    """What the pool reads of the sequence a slot serves (engine/sequence.py's Sequence)."""
    n_past: int                 # tokens of it whose cells are in the cache
    prefill_tokens: list[int]   # the tokens it (re)starts from

_cell_ids = itertools.count()


class CellLedger:
    """How many slots hold each KV cell (our numbering); its length is the cells in use."""

    def __init__(self) -> None:
        self._holders: dict[int, int] = {}

    def __len__(self) -> int:  # one dict length: safe to read from another thread
        return len(self._holders)

    def hold(self, cells) -> None:
        for c in cells:
            self._holders[c] = self._holders.get(c, 0) + 1

    def release(self, cells) -> None:
        for c in cells:
            n = self._holders[c] - 1
            if n:
                self._holders[c] = n
            else:
                del self._holders[c]


@dataclass
class Slot:
    id: int
    cached: list[int] = field(default_factory=list)  # tokens at positions 0..len-1 in the KV cache
    # Which KV cell holds each of those positions, in our own numbering: a shared prefix
    # shares numbers, so the distinct numbers over all slots count the cells in use.
    cells: list[int] = field(default_factory=list)
    seq: Occupant | None = None
    last_used: int = 0
    ledger: CellLedger = field(default_factory=CellLedger, repr=False)  # shared by a pool's slots

    def extend(self, tokens: list[int]) -> None:
        new = list(itertools.islice(_cell_ids, len(tokens)))
        self.cached.extend(tokens)
        self.cells.extend(new)
        self.ledger.hold(new)

    def trim(self, n: int) -> None:
        self.ledger.release(self.cells[n:])
        del self.cached[n:]
        del self.cells[n:]

    def share(self, donor: "Slot", n: int) -> None:
        self.ledger.release(self.cells)
        self.cached[:] = donor.cached[:n]
        self.cells[:] = donor.cells[:n]
        self.ledger.hold(self.cells)

    def restored(self, tokens) -> None:
        """The slot now holds a saved state of these tokens (new cells of its own)."""
        self.trim(0)
        self.extend(list(tokens))


def cells_in_use(slots: list[Slot]) -> int:
    """KV cells holding something, shared ones once (safe from another thread)."""
    ledgers = {id(s.ledger): s.ledger for s in slots}
    return sum(len(ledger) for ledger in ledgers.values())


PREFIX_CHUNK = 256   # tokens compared at once in common_prefix


def common_prefix(a, b) -> int:
    """Length of the common prefix of two token lists (or tuples): PREFIX_CHUNK tokens at a time
    compared in C, then the chunk that differs one by one (prompts run to 100k tokens)."""
    if type(a) is not type(b):
        b = type(a)(b)   # a list slice never equals a tuple slice
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i:i + PREFIX_CHUNK] == b[i:i + PREFIX_CHUNK]:
        i += PREFIX_CHUNK
    end = min(i + PREFIX_CHUNK, n)
    while i < end and a[i] == b[i]:
        i += 1
    return min(i, n)   # equal to the end, the last chunk stepped past it
