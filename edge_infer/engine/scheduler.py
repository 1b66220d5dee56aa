"""Which sequences get a slot, which tokens go into the next batch, which sequences end.

Pure bookkeeping (no llama.cpp calls) so its decisions can be unit-tested with fakes.
A slot is a llama.cpp sequence id; it remembers the tokens its KV cache holds so a new
request can reuse the longest common prefix (multi-turn chat skips its history).
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass, field

from edge_infer.engine.postprocess import Outcome, Sampled, Vocab, postprocess_token
from edge_infer.engine.sequence import Sequence, Status

_tick = itertools.count()
SMALL_LOSS = 256  # cached tokens not worth keeping a slot for (one flash-attention block)


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


def cells_in_use(slots: list[Slot]) -> int:
    """KV cells holding something, shared ones once (safe from another thread: copies first)."""
    return len(set().union(*(list(s.cells) for s in slots)))


@dataclass
class BatchItem:
    seq: Sequence
    tokens: list[int]
    pos: int
    wants_logits: bool  # last prompt token or a decode token: sample after decode
    row: int = -1       # the logits row of its last token, set by ModelRunner.decode


def common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


@dataclass
class Admission:
    seq: Sequence
    slot: Slot
    keep: int                  # prompt tokens whose KV is reused (not evaluated again)
    donor: Slot | None = None  # another slot the first `keep` cells are shared from


class Scheduler:
    def __init__(self, n_slots: int, n_batch: int, share_prefixes: bool = False,
                 n_ctx_seq: int | None = None):
        self.slots = [Slot(i) for i in range(n_slots)]
        self.n_batch = n_batch
        self.n_ctx_seq = n_ctx_seq  # tokens one sequence may hold (None: no limit)
        # Share a prefix held by another slot (llama.cpp's seq_cp: in one unified KV buffer
        # the cells are tagged with both sequences, nothing is copied). Requests with the same
        # system prompt then evaluate it once, and a free slot's own history survives.
        self.share_prefixes = share_prefixes
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []

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
            seq = self.waiting.popleft()
            limit = len(seq.prompt) - 1

            # Each slot's reusable prefix, once per request (prompts and histories can be long).
            reuse = {s.id: min(common_prefix(s.cached, seq.prompt), kept.get(s.id, limit), limit)
                     for s in self.slots}
            donor = None
            if self.share_prefixes:
                # Keep long histories (a finished chat's next turn will want them): take a slot
                # that loses at most SMALL_LOSS cached tokens, the longest prefix first. Small
                # leftovers are cheap to evaluate again, and overwriting them keeps the cache
                # compact: attention runs over every cell up to the highest one in use
                # (measured: ~5% slower decode alone when eight slots' leftovers stay).
                def loss(s: Slot) -> int:
                    lost = len(s.cached) - reuse[s.id]
                    return lost if lost > SMALL_LOSS else 0

                best = min(free, key=lambda s: (loss(s), -reuse[s.id], s.last_used))
                keep = reuse[best.id]
                other = max((s for s in self.slots if s is not best), key=lambda s: reuse[s.id], default=None)
                if other is not None and reuse[other.id] > keep:
                    keep, donor = reuse[other.id], other
            else:
                best = max(free, key=lambda s: (reuse[s.id], -s.last_used))
                keep = reuse[best.id]
            best.seq = seq
            best.last_used = next(_tick)
            kept[best.id] = keep
            seq.slot = best.id
            seq.status = Status.PREFILL
            self.running.append(seq)
            admitted.append(Admission(seq, best, keep, donor))
        return admitted

    def plan(self) -> list[BatchItem]:
        """Next batch: one token for every decoding sequence, then prompt chunks up to n_batch."""
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
                chunk = seq.prompt[seq.n_past:seq.n_past + n]
                items.append(BatchItem(seq, chunk, seq.n_past, n == seq.prefill_left))
                budget -= n
        return items

    def decoded(self, items: list[BatchItem]) -> list[BatchItem]:
        """Record a decode that succeeded: the slots cache these tokens, and a prompt evaluated
        to its end starts generating. Returns the items whose logits are sampled now."""
        to_sample = []
        for it in items:
            self.slots[it.seq.slot].extend(it.tokens)
            it.seq.n_past += len(it.tokens)
            if it.wants_logits:
                it.seq.status = Status.DECODE
                to_sample.append(it)
        return to_sample

    def postprocess(self, sampled: list[Sampled], vocab: Vocab) -> list[Outcome]:
        """Give each sequence its sampled token and decide which ones end (postprocess.py).
        The engine streams the events and finishes those, which frees their slots."""
        return [postprocess_token(s, vocab, self.n_ctx_seq) for s in sampled]

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
