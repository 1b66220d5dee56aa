"""Which sequences get a slot, which tokens go into the next batch, which sequences end.

Pure bookkeeping (no llama.cpp calls) so its decisions can be unit-tested with fakes.
A slot is a llama.cpp sequence id; it remembers the tokens its KV cache holds so a new
request can reuse the longest common prefix (multi-turn chat skips its history).
All slots share one pool of KV cells: a request is admitted only when its prompt fits
beside what the running ones hold, and when a step needs more cells than are free idle
slots' leftovers are evicted, then the youngest running sequence is preempted (vLLM's
policy); a preempted sequence waits at the head of the queue and resumes. Every decision is
made here; the KV pool (kv/pool.py, nano-vllm's BlockManager) is called one way to carry it
out and knows nothing of queues.
"""

from __future__ import annotations

import itertools
import logging
from collections import deque
from dataclasses import dataclass, field

from edge_infer.engine.postprocess import Sampled, Vocab, postprocess_token
from edge_infer.engine.sequence import Sequence, Status
from edge_infer.engine.step_cost import StepCost
from edge_infer.engine.kv.pool import Admission, KvPool
from edge_infer.engine.kv.slots import Slot, common_prefix

__all__ = ["Admission", "BatchItem", "Scheduler", "SMALL_LOSS", "common_prefix"]

log = logging.getLogger("edge_infer.engine")
_tick = itertools.count()
SMALL_LOSS = 256  # cached tokens not worth keeping a slot for (one flash-attention block)
# Drafted tokens in one step, over all sequences: verifying them is extra compute, which a
# CPU batch of many sequences has least of to spare.
MAX_DRAFT_TOKENS_PER_STEP = 16


@dataclass
class BatchItem:
    seq: Sequence
    tokens: list[int]
    pos: int
    wants_logits: bool  # last prompt token or a decode token: sample after decode
    row: int = -1       # the logits row of its last token, set by ModelRunner.decode
    # Speculation: drafted tokens fed after the decode token (tokens = [next] + draft); each
    # position's logits are sampled to verify them (engine/speculation.py).
    draft: list[int] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)  # logits rows of every token, when drafted


class Scheduler:
    def __init__(self, kv: KvPool, n_batch: int, n_ctx_seq: int | None = None, share_prefixes: bool = False):
        self.kv = kv
        self.slots = kv.slots
        self.n_batch = n_batch
        self.n_ctx_seq = n_ctx_seq  # tokens one sequence may hold (None: no limit)
        # Share a prefix held by another slot (llama.cpp's seq_cp: in one unified KV buffer
        # the cells are tagged with both sequences, nothing is copied). Requests with the same
        # system prompt then evaluate it once, and a free slot's own history survives.
        self.share_prefixes = share_prefixes
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.step_cost = StepCost()  # the engine times its decodes into it; drafts follow it
        self.preemptions = 0  # running sequences taken off their slot for room

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    def admit(self) -> list[Admission]:
        """Give free slots to waiting sequences, first come first served.

        The engine must start them in the order returned: a slot given out earlier in the
        same call keeps only its own `keep` tokens, which is all a later donor may share.
        A reused prefix always leaves one prompt token to evaluate (sampling needs its logits).
        """
        admitted: list[Admission] = []
        kept: dict[int, int] = {}  # slot id -> tokens it still holds once started
        while self.waiting:
            free = [s for s in self.slots if s.seq is None]
            if not free:
                break
            seq = self.waiting[0]
            tokens = seq.prefill_tokens
            # A fresh prompt leaves its last token to evaluate (sampling needs its logits);
            # a resumed sequence already has its next token, so all of it may be reused.
            limit = len(tokens) if seq.resumed else len(tokens) - 1
            if not self.fits(len(tokens)):
                break  # first come, first served: nothing overtakes the head of the queue
            self.waiting.popleft()

            # Each slot's reusable prefix, once per request (prompts and histories can be long).
            reuse = {s.id: min(common_prefix(s.cached, tokens), kept.get(s.id, limit), limit)
                     for s in self.slots}
            donor = None
            if self.share_prefixes:
                # Keep long histories (a finished chat's next turn will want them): take a slot
                # that loses at most SMALL_LOSS cached tokens, the longest prefix first. Small
                # leftovers are cheap to evaluate again, and overwriting them keeps the cache
                # compact: attention runs over every cell up to the highest one in use
                # (measured: ~5% slower decode alone when eight slots' leftovers stay).
                # Among slots that would lose a long history, the least recently used goes
                # (comparing how many tokens each loses would keep overwriting the newest).
                def loss(s: Slot) -> bool:
                    return len(s.cached) - reuse[s.id] > SMALL_LOSS

                # (A long history lost either way: its prefix can still come from a donor, below.)
                best = min(free, key=lambda s: (loss(s), 0 if loss(s) else -reuse[s.id], s.last_used))
                keep = reuse[best.id]
                other = max((s for s in self.slots if s is not best), key=lambda s: reuse[s.id], default=None)
                if other is not None and reuse[other.id] > keep:
                    keep, donor = reuse[other.id], other
            else:
                best = max(free, key=lambda s: (reuse[s.id], -s.last_used))
                keep = reuse[best.id]
            saved = min(self.kv.cached_prefix(tokens), limit)
            restore = saved > keep
            if restore:
                keep, donor = saved, None
            best.seq = seq
            best.last_used = next(_tick)
            kept[best.id] = keep
            seq.slot = best.id
            seq.status = Status.PREFILL
            self.running.append(seq)
            admitted.append(Admission(seq, best, keep, donor, restore))
        return admitted

    # ---- the shared KV pool ------------------------------------------------------------
    def cells_held(self) -> int:
        """Cells the running sequences hold or will take to finish their prompts, plus one
        each for the next decode step: what admission must leave to them."""
        return self.kv.cells_kept() + sum(max(0, seq.prefill_left) if seq.status is Status.PREFILL else 1
                                          for seq in self.running)

    def fits(self, n_tokens: int) -> bool:
        """Does a sequence of n_tokens fit beside the running ones? (Idle slots' leftovers
        do not count: they are evicted when the cells are needed.) With nothing running,
        anything fits: submit() already refused prompts longer than one sequence may hold."""
        if self.kv.pool_cells is None or not self.running:
            return True
        return self.cells_held() + n_tokens <= self.kv.pool_cells

    # ---- preemption: decided here only --------------------------------------------------
    def make_room(self, items: list[BatchItem]) -> list[BatchItem]:
        """Free cells until the step fits: idle leftovers first (least recently used, saved to
        the prompt cache by `evict`), then the youngest running sequence is preempted. Returns
        the step, planned again when anything was preempted."""
        while items and not self.kv.free_up(sum(len(it.tokens) for it in items)):
            if self.preempt_youngest() is None:
                break
            items = self.plan()
        return items

    def kv_was_full(self) -> bool:
        """llama.cpp found no room for a step although we counted enough (nothing was decoded):
        preempt the youngest and drop its cells (our record of them was off); the step is
        planned again next time. False when only one sequence runs: then the step fails."""
        if len(self.running) <= 1:
            return False
        slot = self.slots[self.running[-1].slot]
        self.preempt_youngest("llama.cpp's KV cache was fuller than counted", logging.WARNING)
        self.kv.forget(slot)
        return True

    def preempt_youngest(self, why: str = "KV pool full", level: int = logging.INFO) -> Sequence | None:
        """Take the most recently admitted running sequence off its slot and put it at the
        head of the queue (its slot keeps the cells until they are evicted); it resumes
        where it was when cells free up."""
        if not self.running:
            return None
        seq = self.running.pop()
        self.slots[seq.slot].seq = None
        seq.preempted()
        self.waiting.appendleft(seq)
        self.preemptions += 1
        log.log(level, "%s: preempted %s (%d tokens to resume)", why, seq.id, len(seq.prefill_tokens))
        return seq

    def plan(self, drafts: bool = True) -> list[BatchItem]:
        """Next batch: one token for every decoding sequence, then prompt chunks up to n_batch,
        then drafts in the room left (none while `drafts` is off: the CPU governor's trial
        compares steps of like size)."""
        items, budget = [], self.n_batch
        for seq in self.running:
            if seq.status is Status.DECODE and seq.next_token is not None:
                items.append(BatchItem(seq, [seq.next_token], seq.n_past, True))
                budget -= 1
        for seq in self.running:
            if budget <= 0:
                break
            if seq.status is Status.PREFILL:
                n = min(seq.prefill_left, budget)
                chunk = seq.prefill_tokens[seq.n_past:seq.n_past + n]
                last = n == seq.prefill_left
                items.append(BatchItem(seq, chunk, seq.n_past, last and not seq.resumed))
                budget -= n
        if budget > 0 and drafts:
            self._add_drafts(items, budget)
        return items

    def _add_drafts(self, items: list[BatchItem], budget: int) -> None:
        """Speculation rides on the batch's spare room: drafts take only free KV cells and
        batch slots left after decode tokens and prompt chunks, never a preemption, and stay
        inside the request's max_tokens and context."""
        n_tokens = sum(len(it.tokens) for it in items)
        spare = min(budget, self.kv.free_cells() - n_tokens, MAX_DRAFT_TOKENS_PER_STEP)
        threshold = self.step_cost.threshold(n_tokens, sum(it.seq.status is Status.DECODE for it in items))
        for it in items:
            seq = it.seq
            if spare <= 0:
                break
            if seq.drafter is None or seq.status is not Status.DECODE:
                continue
            room = spare
            if seq.params.max_tokens:   # each accepted draft token is one more generated token
                room = min(room, seq.params.max_tokens - len(seq.generated) - 1)
            if self.n_ctx_seq is not None:  # leave a cell to feed the last sampled token back
                room = min(room, self.n_ctx_seq - seq.n_past - 2)
            seq.drafter.sync(seq.generated)
            draft = seq.drafter.draft(room, threshold)
            if draft:
                it.draft = draft
                it.tokens = it.tokens + draft
                spare -= len(draft)

    def decoded(self, items: list[BatchItem]) -> list[BatchItem]:
        """Record a decode that succeeded: the slots cache these tokens, and a prompt evaluated
        to its end starts generating. Returns the items whose logits are sampled now."""
        to_sample = []
        for it in items:
            seq = it.seq
            self.slots[seq.slot].extend(it.tokens)
            seq.n_past += len(it.tokens)
            if seq.status is Status.PREFILL and seq.prefill_left == 0:
                seq.status = Status.DECODE  # a resumed one goes on with its next_token
            if it.wants_logits:
                to_sample.append(it)
        return to_sample

    def postprocess(self, sampled: list[Sampled], vocab: Vocab):
        """Give each sequence its sampled tokens in order and decide which ones end
        (postprocess.py), one at a time: a consumer that stops at a finish (one sequence's
        verified draft) leaves the tokens after it unapplied. The engine streams the events
        and finishes those sequences, which frees their slots."""
        for s in sampled:
            yield postprocess_token(s, vocab, self.n_ctx_seq)

    def finish(self, seq: Sequence) -> None:
        seq.status = Status.FINISHED
        if seq in self.running:
            self.running.remove(seq)
        if seq.slot >= 0 and self.slots[seq.slot].seq is seq:
            self.slots[seq.slot].seq = None

    def take_dropped(self, now: float) -> list[Sequence]:
        """Sequences to end before the next step (cancelled, abandoned, past their deadline):
        waiting ones leave the queue here, running ones keep their slot until finish()."""
        waiting = [s for s in self.waiting if s.dropped(now)]
        for seq in waiting:
            self.waiting.remove(seq)
        return waiting + [s for s in self.running if s.dropped(now)]
