"""What the slots' KV cells hold, and making room in the shared pool.

The scheduler decides who runs and who is preempted; this applies those decisions to
llama.cpp's cache: share a donor's prefix, restore a saved conversation from the prompt
cache, save what a slot is about to lose, evict idle leftovers. Engine thread only.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from edge_infer.engine.disk_cache import DiskCache
from edge_infer.engine.kv_state import restore_sequence, save_sequence
from edge_infer.engine.llama import LlamaContext
from edge_infer.engine.prompt_cache import PromptCache
from edge_infer.engine.scheduler import Admission, Scheduler, Slot

log = logging.getLogger("edge_infer.engine")
# Shorter histories are cheaper to evaluate again than to keep (and crowd out longer ones).
MIN_SAVED_TOKENS = 64


@dataclass
class MemoryCounters:
    evictions: int = 0         # idle slots' leftovers dropped from the pool for room
    restored_tokens: int = 0   # tokens put back from the prompt cache instead of evaluated
    restored_from_disk: int = 0  # of those, tokens read from the disk tier
    restore_failures: int = 0  # restores llama.cpp refused (evaluated instead)


class SlotMemory:
    def __init__(self, ctx: LlamaContext, scheduler: Scheduler, cache: PromptCache, n_swa: int = 0,
                 disk: DiskCache | None = None):
        self.ctx, self.scheduler, self.cache, self.n_swa, self.disk = ctx, scheduler, cache, n_swa, disk
        self.counters = MemoryCounters()
        if disk is not None:  # what the RAM tier lets go goes to disk
            cache.on_evict = lambda entry: disk.put(entry.tokens, entry.data)

    def cached_prefix(self, tokens) -> int:
        """The longest saved prefix of `tokens`, in RAM or on disk (the scheduler's question)."""
        return max(self.cache.peek(tokens), self.disk.peek(tokens) if self.disk else 0)

    def start(self, admission: Admission) -> int:
        """Put the admitted sequence's reusable prefix in its slot; returns the tokens kept."""
        seq, slot, keep, donor = admission.seq, admission.slot, admission.keep, admission.donor
        if donor is not None:
            self.save(slot, keep=0)
            self.forget(slot)
            self.ctx.seq_cp(donor.id, slot.id, 0, keep)
            slot.share(donor, keep)
        elif admission.restore:
            keep = self._restore(slot, seq.prefill_tokens, keep)
        if keep > 0 and self.n_swa > 0 and self.ctx.seq_pos_min(slot.id) > max(0, keep - self.n_swa):
            keep = 0  # sliding-window cache already dropped positions the suffix attends to
        if keep < len(slot.cached):
            self.save(slot, keep)
            if self.ctx.seq_rm(slot.id, keep, -1):
                slot.trim(keep)
            else:
                self.forget(slot)  # removing a whole sequence never fails
                keep = 0
        return keep

    def _restore(self, slot: Slot, tokens: list[int], keep: int) -> int:
        self.save(slot, keep=0)
        self.forget(slot)
        from_disk = self.disk is not None and self.disk.peek(tokens) > self.cache.peek(tokens)
        started = time.perf_counter()
        if from_disk:
            found = self.disk.load(tokens)
        else:
            entry = self.cache.take(tokens)
            found = (entry.tokens, entry.data) if entry else None
        if found is None:
            return 0
        saved, data = found
        self._free_cells(len(saved), but=slot)
        if not restore_sequence(self.ctx, slot.id, data):
            self.counters.restore_failures += 1
            log.warning("could not restore %d cached tokens into slot %d; evaluating them", len(saved), slot.id)
            return 0
        slot.restored(saved)
        self.counters.restored_tokens += min(keep, len(saved))
        if from_disk:
            self.counters.restored_from_disk += min(keep, len(saved))
            self.disk.counters.restore_seconds += time.perf_counter() - started
        return min(keep, len(saved))

    def _free_cells(self, n: int, but: Slot) -> None:
        """Evict idle leftovers (not `but`'s) until n cells are free; admission counted them free."""
        while self.scheduler.free_cells() < n:
            victim = self.scheduler.idle_victim(but)
            if victim is None:
                return
            self.evict(victim)

    def evict(self, slot: Slot) -> None:
        self.save(slot, keep=0)
        self.forget(slot)
        self.counters.evictions += 1

    def save(self, slot: Slot, keep: int) -> None:
        """Before a slot loses its cells past `keep`: keep the whole history in the prompt cache
        when that loses enough to matter and the cache has room for it."""
        disk_cap = self.disk.counters.cap_bytes if self.disk and self.disk.enabled else 0
        if max(self.cache.cap_bytes, disk_cap) <= 0 or len(slot.cached) - keep < MIN_SAVED_TOKENS:
            return
        data = save_sequence(self.ctx, slot.id, max_bytes=max(self.cache.cap_bytes, disk_cap))
        if data is not None and not self.cache.put(slot.cached, data) and disk_cap:
            self.disk.put(slot.cached, data)  # too large for the RAM tier alone

    def close(self, persist: bool) -> None:
        """The engine is closing (unload, eviction, shutdown): write every conversation the
        slots and the RAM tier hold to the disk tier (unless the engine thread still holds the
        context), so its next turn restores it."""
        if self.disk is None:
            return
        if persist and self.disk.enabled:
            self._persist()
        self.disk.close()

    def _persist(self) -> None:
        for slot in self.scheduler.slots:
            if len(slot.cached) >= MIN_SAVED_TOKENS and not self.disk.holds(slot.cached):
                data = save_sequence(self.ctx, slot.id, max_bytes=self.disk.counters.cap_bytes)
                if data is not None:
                    self.disk.put(slot.cached, data, wait=True)
        for entry in self.cache.entries():
            if not self.disk.holds(entry.tokens):
                self.disk.put(entry.tokens, entry.data, wait=True)

    def drop_rejected(self, slot: Slot, n_rejected: int) -> bool:
        """Remove the cells of draft tokens the model did not confirm (the newest ones)."""
        if n_rejected <= 0:
            return True
        keep = len(slot.cached) - n_rejected
        if self.ctx.seq_rm(slot.id, keep, -1):
            slot.trim(keep)
            return True
        self.forget(slot)
        return False

    def forget(self, slot: Slot) -> None:
        """Empty a slot's KV cells and its record of them (slot.cached mirrors the cache)."""
        self.ctx.seq_rm(slot.id, -1, -1)
        slot.trim(0)

    def reset_failed(self, slot: Slot) -> None:
        """After a failed decode: the slot's cells are unknown, drop them (nothing saved)."""
        self.forget(slot)
