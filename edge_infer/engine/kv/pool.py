"""The KV pool: the slots (llama.cpp sequence ids), the cells they hold, and what leaves them.

The scheduler's block manager, as nano-vllm's BlockManager is its Scheduler's: the scheduler
decides who runs, who is admitted and who is preempted, and calls the pool one way; the
pool knows nothing of queues. Here: the cell ledger (how many cells are in use, shared
prefixes counted once), llama.cpp's seq_cp / seq_rm, idle leftovers evicted least recently
used first, and the prompt cache's tiers (kv/tiers.py) for what a slot is about to lose.

Without a context (ctx=None) the pool is bookkeeping alone: the scheduler's unit tests.
Engine thread only.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from edge_infer.engine.kv.slots import CellLedger, Occupant, Slot, cells_in_use
from edge_infer.engine.kv.tiers import TieredCache
from edge_infer.engine.native.kv_state import restore_sequence, save_sequence

if TYPE_CHECKING:
    from edge_infer.engine.native.context import LlamaContext

log = logging.getLogger("edge_infer.engine")
# Shorter histories are cheaper to evaluate again than to keep (and crowd out longer ones).
MIN_SAVED_TOKENS = 64


@dataclass
class MemoryCounters:
    evictions: int = 0         # idle slots' leftovers dropped from the pool for room
    restored_tokens: int = 0   # tokens put back from the prompt cache instead of evaluated
    restored_from_disk: int = 0  # of those, tokens read from the disk tier
    restore_failures: int = 0  # restores llama.cpp refused (evaluated instead)


@dataclass
class Admission:
    """The scheduler's decision for one waiting sequence, which the pool carries out (start)."""
    seq: Occupant  # a Sequence
    slot: Slot
    keep: int                  # prompt tokens whose KV is reused (not evaluated again)
    donor: Slot | None = None  # another slot the first `keep` cells are shared from
    restore: bool = False      # the first `keep` tokens come from the prompt cache


class KvPool:
    def __init__(self, n_slots: int, pool_cells: int | None = None,
                 ctx: LlamaContext | None = None, tiers: TieredCache | None = None, n_swa: int = 0):
        ledger = CellLedger()  # one pool: a shared prefix's cells count once
        self.slots = [Slot(i, ledger=ledger) for i in range(n_slots)]
        self.pool_cells = pool_cells  # KV cells all slots share (None: no limit)
        self.ctx, self.tiers, self.n_swa = ctx, tiers, n_swa
        self.counters = MemoryCounters()

    @classmethod
    def for_context(cls, ctx: LlamaContext, settings, n_swa: int, tiers: TieredCache) -> "KvPool":
        """The pool of an engine's context: one pool of all cells when the KV buffer is unified."""
        return cls(settings.parallel, ctx.n_ctx if settings.kv_unified else None, ctx=ctx, tiers=tiers, n_swa=n_swa)

    @property
    def can_share_cells(self) -> bool:
        """Can one cell serve several sequences (seq_cp)? Only in one unified buffer; and with
        sliding-window layers a shared cell could not be recycled by the window, so those
        models keep to per-slot reuse."""
        return self.pool_cells is not None and self.n_swa == 0

    # ---- what the scheduler asks ----------------------------------------------------------
    def cells_in_use(self) -> int:
        return cells_in_use(self.slots)

    def free_cells(self) -> int:
        if self.pool_cells is None:
            return 1 << 62
        return self.pool_cells - cells_in_use(self.slots)

    def cells_kept(self) -> int:
        """Cells the busy slots keep for their sequences (their leftovers past a sequence's
        n_past are trimmed when it starts)."""
        return len(set().union(*(s.cells[:s.seq.n_past] for s in self.slots if s.seq is not None)))

    def cached_prefix(self, tokens) -> int:
        """The longest saved prefix of `tokens` in the prompt cache's tiers (0: none)."""
        return self.tiers.peek(tokens) if self.tiers is not None else 0

    def idle_victim(self, but: Slot | None = None) -> Slot | None:
        """The least recently used slot with no sequence that still holds cells."""
        idle = [s for s in self.slots if s.seq is None and s.cells and s is not but]
        return min(idle, key=lambda s: s.last_used, default=None)

    def free_up(self, n: int, but: Slot | None = None) -> bool:
        """Evict idle leftovers, least recently used first (not `but`'s), until n cells are
        free; False when none are left to evict and n still do not fit."""
        while self.free_cells() < n:
            victim = self.idle_victim(but)
            if victim is None:
                return False
            self.evict(victim)
        return True

    # ---- carrying out the scheduler's decisions -----------------------------------------
    def start(self, admission: Admission) -> int:
        """Put the admitted sequence's reusable prefix in its slot; returns the tokens kept."""
        seq, slot, keep, donor = admission.seq, admission.slot, admission.keep, admission.donor
        if self.ctx is None:  # bookkeeping alone
            slot.share(donor, keep) if donor is not None else slot.trim(keep)
            return keep
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
        started = time.perf_counter()
        saved = self.tiers.take(tokens)
        if saved is None:
            return 0
        self.free_up(len(saved.tokens), but=slot)  # admission counted them free
        if not restore_sequence(self.ctx, slot.id, saved.data):
            self.counters.restore_failures += 1
            log.warning("could not restore %d cached tokens into slot %d; evaluating them", len(saved.tokens), slot.id)
            return 0
        slot.restored(saved.tokens)
        kept = min(keep, len(saved.tokens))
        self.counters.restored_tokens += kept
        if saved.from_disk:
            self.counters.restored_from_disk += kept
            self.tiers.restored_from_disk(started)
        return kept

    def evict(self, slot: Slot) -> None:
        """An idle slot's leftovers leave the pool (saved to the prompt cache first)."""
        self.save(slot, keep=0)
        self.forget(slot)
        self.counters.evictions += 1

    def save(self, slot: Slot, keep: int) -> None:
        """Before a slot loses its cells past `keep`: keep the whole history in the prompt cache
        when that loses enough to matter and a tier has room for it."""
        if self.ctx is None or self.tiers is None or self.tiers.cap_bytes <= 0 \
                or len(slot.cached) - keep < MIN_SAVED_TOKENS:
            return
        data = save_sequence(self.ctx, slot.id, max_bytes=self.tiers.cap_bytes)
        if data is not None:
            self.tiers.put(slot.cached, data)

    def drop_rejected(self, slot: Slot, n_rejected: int) -> bool:
        """Remove the cells of draft tokens the model did not confirm (the newest ones)."""
        if n_rejected <= 0:
            return True
        keep = len(slot.cached) - n_rejected
        if self.ctx is None or self.ctx.seq_rm(slot.id, keep, -1):
            slot.trim(keep)
            return True
        self.forget(slot)
        return False

    def forget(self, slot: Slot) -> None:
        """Empty a slot's KV cells and its record of them (slot.cached mirrors the cache);
        after a failed decode too, when what the cells hold is unknown."""
        if self.ctx is not None:
            self.ctx.seq_rm(slot.id, -1, -1)
        slot.trim(0)

    def close(self, persist: bool) -> None:
        """The engine is closing (unload, eviction, shutdown): every conversation the slots and
        the RAM tier hold goes to the disk tier (unless the engine thread still holds the
        context), so its next turn restores it."""
        if self.tiers is None:
            return
        if persist and self.ctx is not None:
            self.tiers.persist((slot.cached, lambda cap, sid=slot.id: save_sequence(self.ctx, sid, max_bytes=cap))
                               for slot in self.slots if len(slot.cached) >= MIN_SAVED_TOKENS)
        self.tiers.close()
