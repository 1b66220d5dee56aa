"""A RAM cache of saved sequences (KV state bytes keyed by their tokens), LRU by bytes.

A conversation that loses its slot leaves its KV here (--prompt-cache-mib); a follow-up
turn whose prompt starts with those tokens restores them instead of evaluating them again, and
so does the same short question asked again (the entry is restored and its tail dropped).
Pure Python: the bytes come from engine/native/kv_state.py, this only decides what to keep.
Not thread-safe: the engine thread alone uses it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from edge_infer.engine.kv.slots import common_prefix


# Restoring copies a whole entry, evaluating its shared part costs compute: an entry whose tail
# past the shared prefix is up to this long, or no longer than the shared part, is worth
# restoring and cutting (a short chat's reply; a turn sent again; an earlier reply that the
# template renders differently now, as templates that drop old thinking do).
PARTIAL_TAIL = 512


def usable_prefix(saved: tuple[int, ...], prompt: tuple[int, ...]) -> int:
    """The prefix a saved entry gives the prompt (0: not worth restoring), for both tiers:
    all of it when the entry is a prefix of the prompt (a follow-up turn); else the tokens
    they share, when what the entry holds past them is at most max(PARTIAL_TAIL, shared)."""
    shared = common_prefix(saved, prompt)
    return shared if len(saved) - shared <= max(PARTIAL_TAIL, shared) else 0


@dataclass(frozen=True)
class CacheEntry:
    tokens: tuple[int, ...]  # the tokens whose KV `data` holds, positions 0..len-1
    data: bytes | bytearray

    @property
    def nbytes(self) -> int:
        return len(self.data)


@dataclass
class CacheCounters:
    entries: int = 0
    bytes: int = 0
    hits: int = 0
    misses: int = 0
    evictions: int = 0


class PromptCache:
    """Entries of (tokens, data) up to cap_bytes of data in all, least recently used out."""

    def __init__(self, cap_bytes: int, on_evict: Callable[[CacheEntry], None] | None = None):
        if cap_bytes < 0:
            raise ValueError("cap_bytes must be >= 0")
        self.cap_bytes = cap_bytes
        self.on_evict = on_evict  # where evicted entries go (the disk tier)
        # Oldest first; keyed by tokens, so a conversation saved twice keeps only the newer.
        self._entries: OrderedDict[tuple[int, ...], CacheEntry] = OrderedDict()
        self._bytes = 0
        self.hits = self.misses = self.evictions = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def bytes(self) -> int:
        return self._bytes

    def counters(self) -> CacheCounters:
        return CacheCounters(len(self._entries), self._bytes, self.hits, self.misses, self.evictions)

    def put(self, tokens, data: bytes | bytearray) -> bool:
        """Store (tokens, data) as the most recent entry; False when it was not stored
        (empty, or larger than the whole cap: it would only evict everything else)."""
        tokens = tuple(tokens)
        if not tokens or not data or len(data) > self.cap_bytes:
            return False
        old = self._entries.pop(tokens, None)
        if old is not None:
            self._bytes -= old.nbytes
        # A shorter entry that this one extends is kept: a prompt that diverges after it
        # can still use it.
        while self._entries and self._bytes + len(data) > self.cap_bytes:
            _, evicted = self._entries.popitem(last=False)
            self._bytes -= evicted.nbytes
            self.evictions += 1
            if self.on_evict is not None:
                self.on_evict(evicted)
        entry = CacheEntry(tokens, data)  # kept as given: a state can be tens of MB, no copy
        self._entries[tokens] = entry
        self._bytes += entry.nbytes
        return True

    def take(self, prompt_tokens) -> CacheEntry | None:
        """Remove and return the entry that shares the longest prefix with the prompt (removed:
        once restored it lives in a slot again); the shorter of equals, less to restore. None
        counts a miss."""
        prompt = tuple(prompt_tokens)
        best, best_shared = None, 0
        for entry in self._entries.values():
            n = self._usable(entry, prompt)
            if n > best_shared or (n == best_shared and n and len(entry.tokens) < len(best.tokens)):
                best, best_shared = entry, n
        if best is None:
            self.misses += 1
            return None
        del self._entries[best.tokens]
        self._bytes -= best.nbytes
        self.hits += 1
        return best

    def peek(self, prompt_tokens) -> int:
        """How many of the prompt's first tokens an entry holds (0: none); changes nothing."""
        prompt = tuple(prompt_tokens)
        return max((self._usable(e, prompt) for e in self._entries.values()), default=0)

    @staticmethod
    def _usable(entry: CacheEntry, prompt: tuple[int, ...]) -> int:
        return usable_prefix(entry.tokens, prompt)  # the slot restores it and drops its tail

    def entries(self) -> list[CacheEntry]:
        return list(self._entries.values())

    def clear(self) -> None:
        """Drop every entry (the model or context changed: the bytes are invalid)."""
        self._entries.clear()
        self._bytes = 0
