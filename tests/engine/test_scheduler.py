"""Scheduler decisions with fake sequences (no model): slots, prefix choice, batch plan."""

from edge_infer.engine.sampling import SamplingParams
from edge_infer.engine.kv.pool import KvPool
from edge_infer.engine.scheduler import SMALL_LOSS, Scheduler, common_prefix
from edge_infer.engine.sequence import Request, Sequence, Status


def seq(tokens):
    return Sequence(Request(prompt_tokens=tokens, sampling=SamplingParams()), tokens, stream=None)


def test_common_prefix():
    assert common_prefix([1, 2, 3], [1, 2, 4]) == 2
    assert common_prefix([], [1]) == 0
    assert common_prefix([1, 2], [1, 2, 3]) == 2


def test_admits_fcfs_until_slots_run_out():
    s = Scheduler(KvPool(2), n_batch=64)
    a, b, c = seq([1, 2]), seq([3, 4]), seq([5, 6])
    for x in (a, b, c):
        s.add(x)
    admitted = s.admit()
    assert [x.seq for x in admitted] == [a, b]
    assert list(s.waiting) == [c] and c.status is Status.WAITING
    s.finish(a)
    assert [x.seq for x in s.admit()] == [c]


def test_picks_the_slot_with_the_longest_common_prefix():
    s = Scheduler(KvPool(3), n_batch=64)
    s.slots[0].cached = [9, 9, 9]
    s.slots[1].cached = [1, 2, 3, 4, 5]
    s.slots[2].cached = [1, 2]
    new = seq([1, 2, 3, 4, 7, 8])
    s.add(new)
    (got,) = s.admit()
    assert got.slot.id == 1 and got.keep == 4 and got.donor is None


def test_always_leaves_one_prompt_token_to_evaluate():
    s = Scheduler(KvPool(1), n_batch=64)
    s.slots[0].cached = [1, 2, 3, 4]
    s.add(seq([1, 2, 3]))
    (got,) = s.admit()
    assert got.keep == 2


def test_ties_go_to_the_least_recently_used_slot():
    s = Scheduler(KvPool(2), n_batch=64)
    first = seq([1])
    s.add(first)
    slot_a = s.admit()[0].slot
    s.finish(first)
    s.add(seq([2]))
    slot_b = s.admit()[0].slot
    assert slot_b.id != slot_a.id  # the other (older) slot keeps the first one's cache intact


def test_plan_puts_decode_tokens_first_then_chunks_prompts():
    s = Scheduler(KvPool(3), n_batch=8)
    dec = seq([1, 2])
    s.add(dec)
    s.admit()
    dec.status, dec.n_past, dec.next_token = Status.DECODE, 2, 42
    p1, p2 = seq(list(range(10, 16))), seq(list(range(20, 30)))
    s.add(p1)
    s.add(p2)
    s.admit()
    items = s.plan()
    assert items[0].seq is dec and items[0].tokens == [42] and items[0].pos == 2 and items[0].wants_logits
    assert items[1].seq is p1 and items[1].tokens == list(range(10, 16)) and items[1].wants_logits
    # One token left in the budget: p2 gets a one-token chunk, no logits yet.
    assert items[2].seq is p2 and items[2].tokens == [20] and not items[2].wants_logits
    assert sum(len(i.tokens) for i in items) == 8


def test_chunked_prefill_resumes_where_it_stopped():
    s = Scheduler(KvPool(1), n_batch=4)
    p = seq(list(range(10)))
    s.add(p)
    s.admit()
    chunks = []
    while p.prefill_left:
        (item,) = s.plan()
        chunks.append((item.pos, item.tokens, item.wants_logits))
        p.n_past += len(item.tokens)
    assert chunks == [(0, [0, 1, 2, 3], False), (4, [4, 5, 6, 7], False), (8, [8, 9], True)]


SYSTEM = [7, 7, 7, 7, 7, 7]


def test_sharing_takes_a_busy_slots_prefix_and_keeps_free_histories():
    s = Scheduler(KvPool(3), n_batch=64, share_prefixes=True)
    busy = seq(SYSTEM + [1, 1])
    s.add(busy)
    s.admit()
    s.slots[busy.slot].cached = SYSTEM + [1, 1, 5]        # decoding
    other = next(x for x in s.slots if x.seq is None)
    other.cached = SYSTEM + [2] * (SMALL_LOSS + 1)        # a finished chat's long history
    new = seq(SYSTEM + [3, 3])
    s.add(new)
    (got,) = s.admit()
    # The empty slot loses nothing; the system prompt comes from a donor.
    assert got.slot.cached == [] and got.keep == len(SYSTEM)
    assert got.donor is not None and got.donor.id in (busy.slot, other.id)


def test_sharing_overwrites_short_leftovers_to_keep_the_cache_compact():
    s = Scheduler(KvPool(3), n_batch=64, share_prefixes=True)
    s.slots[1].cached = SYSTEM + [2] * 40                 # a short finished request
    new = seq(SYSTEM + [3, 3])
    s.add(new)
    (got,) = s.admit()
    assert got.slot.id == 1 and got.keep == len(SYSTEM) and got.donor is None


def test_sharing_continues_a_conversation_in_its_own_slot():
    s = Scheduler(KvPool(2), n_batch=64, share_prefixes=True)
    s.slots[0].cached = SYSTEM + [2, 2]
    turn = seq(SYSTEM + [2, 2, 9, 9])
    s.add(turn)
    (got,) = s.admit()
    assert got.slot.id == 0 and got.keep == len(SYSTEM) + 2 and got.donor is None


def test_a_donor_given_out_in_the_same_round_shares_only_what_it_keeps():
    s = Scheduler(KvPool(2), n_batch=64, share_prefixes=True)
    s.slots[0].cached = SYSTEM + [4, 4, 4]
    s.slots[1].cached = [8] * 12
    a = seq(SYSTEM[:3] + [5])        # continues slot 0 for 3 tokens; slot 0 will hold only those
    b = seq(SYSTEM + [4, 4, 6])      # would like 8 tokens of slot 0's old cache
    s.add(a)
    s.add(b)
    got_a, got_b = s.admit()
    assert got_a.slot.id == 0 and got_a.keep == 3
    assert got_b.slot.id == 1 and got_b.donor is s.slots[0] and got_b.keep == 3


def test_no_sharing_without_the_flag():
    s = Scheduler(KvPool(2), n_batch=64)
    busy = seq(SYSTEM + [1])
    s.add(busy)
    s.admit()
    s.slots[busy.slot].cached = SYSTEM + [1]
    s.add(seq(SYSTEM + [3]))
    (got,) = s.admit()
    assert got.donor is None and got.keep == 0


def test_cells_in_use_counts_shared_cells_once():
    from edge_infer.engine.kv.slots import CellLedger, Slot, cells_in_use

    pool = CellLedger()
    a, b = Slot(0, ledger=pool), Slot(1, ledger=pool)
    a.extend(list(range(10)))
    b.share(a, 6)
    b.extend([50, 51, 52])
    assert b.cached == [0, 1, 2, 3, 4, 5, 50, 51, 52]
    assert cells_in_use([a, b]) == 13
    a.trim(4)            # b still holds positions 4 and 5 of the shared prefix
    assert cells_in_use([a, b]) == 9
    b.trim(0)
    assert cells_in_use([a, b]) == 4
    b.share(a, 2)        # sharing again holds the same cells, nothing new
    assert cells_in_use([a, b]) == 4
    b.restored([7, 8, 9])  # a restore puts the state in cells of its own
    assert cells_in_use([a, b]) == 7
    assert len(pool) == len(set(a.cells) | set(b.cells))
