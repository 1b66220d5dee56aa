"""The shared KV pool: its size (--kv-budget), admission, preemption and resume, with fake
sequences and no model (engine/scheduler.py, plan/kv_pool.py)."""

import pytest

from edge_infer.engine.sampling import SamplingParams
from edge_infer.engine.kv.pool import KvPool
from edge_infer.engine.scheduler import Scheduler
from edge_infer.engine.sequence import Request, Sequence, Status
from edge_infer.errors import EdgeInferError
from edge_infer.plan.kv_pool import parse_kv_budget, pool_cells
from edge_infer.units import GiB, MiB

SMOL_CELL = 23040  # SmolLM2-135M f16: 30 layers x 3 KV heads x (64 + 64) x 2 bytes


def seq(tokens):
    return Sequence(Request(prompt_tokens=tokens, sampling=SamplingParams()), list(tokens), stream=None)


@pytest.mark.parametrize("text,parsed", [
    ("256MiB", (256 * MiB, None)), ("256", (256 * MiB, None)), ("1.5GiB", (int(1.5 * GiB), None)),
    ("2g", (2 * GiB, None)), ("8192cells", (None, 8192)), ("300c", (None, 300)), (" 64 MB ", (64 * MiB, None)),
])
def test_parse_kv_budget(text, parsed):
    assert parse_kv_budget(text) == parsed


@pytest.mark.parametrize("text", ["", "lots", "-5MiB", "0", "0cells", "1.5cells", "12TiB", "256 MiB extra"])
def test_parse_kv_budget_refuses_with_the_flag_named(text):
    with pytest.raises(EdgeInferError, match="--kv-budget"):
        parse_kv_budget(text)


def test_pool_size_default_and_budgets():
    # Default: two contexts however many slots (before the pool: ctx x slots).
    assert pool_cells("", 4096, 4, SMOL_CELL) == 8192
    assert pool_cells("", 4096, 1, SMOL_CELL) == 4096
    assert pool_cells("", 1000, 1, SMOL_CELL) == 1024  # padded to 256 as llama.cpp pads
    # A memory budget never goes over: 256 MiB / 22.5 KiB = 11650 cells -> 11520.
    assert pool_cells("256MiB", 4096, 4, SMOL_CELL) == 11520
    assert pool_cells("8192cells", 4096, 4, SMOL_CELL) == 8192
    assert pool_cells("100cells", 4096, 4, SMOL_CELL) == 256
    with pytest.raises(EdgeInferError, match="less than llama.cpp's minimum of 256"):
        pool_cells("1MiB", 4096, 4, SMOL_CELL)


def running(s: Scheduler, *seqs):
    for x in seqs:
        s.add(x)
    admitted = s.admit()
    for a in admitted:  # as if the prompt were evaluated
        a.slot.extend(a.seq.prompt)
        a.seq.n_past = len(a.seq.prompt)
        a.seq.status = Status.DECODE
    return admitted


def test_admission_waits_until_the_prompt_fits_beside_the_running():
    s = Scheduler(KvPool(4, pool_cells=1000), n_batch=512)
    a = seq(range(600))
    running(s, a)
    big, small = seq(range(1000, 1500)), seq(range(2000, 2010))
    s.add(big)
    s.add(small)
    assert s.admit() == []  # 600 + 1 held + 500 > 1000; the small one may not overtake
    assert list(s.waiting) == [big, small]
    s.finish(a)  # its cells stay as an idle leftover: evictable, so they do not count
    assert [x.seq for x in s.admit()] == [big, small]


def test_a_lone_request_is_always_admitted():
    s = Scheduler(KvPool(2, pool_cells=256), n_batch=512)
    s.add(seq(range(255)))
    assert len(s.admit()) == 1


def test_preempting_the_youngest_and_resuming_without_repeating_a_token():
    s = Scheduler(KvPool(2, pool_cells=2048), n_batch=512)
    old, young = seq([1, 2, 3]), seq([7, 8, 9])
    running(s, old, young)
    young.generated = [40, 41, 42]  # 40 and 41 are in the cache, 42 is sampled, not yet fed
    young.next_token = 42
    young.n_past = 5
    s.slots[young.slot].extend([40, 41])

    assert s.preempt_youngest() is young
    assert list(s.waiting) == [young] and s.running == [old]
    assert young.status is Status.WAITING and young.slot == -1 and young.n_past == 0
    assert young.prefill_tokens == [7, 8, 9, 40, 41] and young.next_token == 42
    assert s.kv.idle_victim() is s.slots[1]  # its old slot keeps the cells until evicted
    s.slots[1].trim(0)

    (adm,) = s.admit()
    assert adm.seq is young and adm.keep == 0
    young.n_past = adm.keep
    items = [it for it in s.plan() if it.seq is young]
    assert items[0].tokens == [7, 8, 9, 40, 41] and not items[0].wants_logits
    to_sample = s.decoded(items)
    assert to_sample == [] and young.status is Status.DECODE and young.next_token == 42
    (nxt,) = [it for it in s.plan() if it.seq is young]
    assert nxt.tokens == [42] and nxt.pos == 5  # the pending token, at the position it had


def test_a_resumed_sequence_may_reuse_all_of_its_cells():
    s = Scheduler(KvPool(1, pool_cells=2048), n_batch=512)
    x = seq([1, 2, 3])
    running(s, x)
    x.generated, x.next_token = [4, 5], 5
    s.slots[0].extend([4])
    s.preempt_youngest()
    (adm,) = s.admit()  # its own slot still holds everything: nothing to evaluate
    assert adm.keep == 4 == len(x.prefill_tokens)


def test_preempted_before_its_first_token_resumes_as_a_fresh_prompt():
    s = Scheduler(KvPool(1, pool_cells=2048), n_batch=512)
    x = seq([1, 2, 3])
    s.add(x)
    s.admit()
    s.preempt_youngest()
    assert not x.resumed and x.prefill_tokens == [1, 2, 3] and x.preemptions == 1


def test_idle_victim_is_the_least_recently_used_leftover():
    s = Scheduler(KvPool(3, pool_cells=2048), n_batch=512)
    a, b, c = seq([1]), seq([2]), seq([3])
    running(s, a, b, c)
    for x in (b, a):
        s.finish(x)
    assert s.kv.idle_victim() is s.slots[0]  # a and b are idle; a was admitted first
    assert s.kv.idle_victim(but=s.slots[0]) is s.slots[1]
    assert s.kv.free_cells() == 2048 - 3


def test_a_new_conversation_overwrites_the_least_recently_used_history():
    # Every slot holds a long history; the new prompt shares nothing: the oldest one goes,
    # not the one that happens to be a few tokens shorter (that was the newest here).
    s = Scheduler(KvPool(3, pool_cells=10_000), n_batch=512, share_prefixes=True)
    for i, n in enumerate((900, 900, 878)):
        x = seq(list(range(i * 1000, i * 1000 + n)))
        running(s, x)
        s.finish(x)
    # It shares 2 tokens with the newest (a "k8-" tag, say): too few to matter.
    s.add(seq([2000, 2001] + list(range(50_000, 50_900))))
    (adm,) = s.admit()
    assert adm.slot.id == 0
