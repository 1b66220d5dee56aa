"""N-gram drafting, its acceptance estimate, the step cost fit, and where the scheduler lets
drafts into a batch (fake sequences, no model)."""

from edge_infer.engine.ngram import MAX_DRAFT, PRIORS, NgramDrafter
from edge_infer.engine.sampling import SamplingParams
from edge_infer.engine.kv.pool import KvPool
from edge_infer.engine.scheduler import MAX_DRAFT_TOKENS_PER_STEP, Scheduler
from edge_infer.engine.sequence import Request, Sequence, Status
from edge_infer.engine.step_cost import MARGIN, PRIOR_RATIO, StepCost


def test_drafts_what_followed_the_longest_matching_suffix():
    d = NgramDrafter([1, 2, 3, 4, 5, 9, 3, 4, 7, 8, 2, 3, 4], max_draft=8)
    # "2 3 4" occurred at the start and continued with 5 9 3 ...; "3 4" last continued with 7.
    assert d.draft(3) == [5, 9, 3]
    d.extend([6])
    assert d.draft(3) == []          # "3 4 6" / "4 6" never occurred
    d.extend([1, 2])                 # "1 2" continued with 3 4 5 at the start
    assert d.draft(4) == [3, 4, 5, 9]


def test_a_one_token_match_drafts_nothing():
    d = NgramDrafter([5, 6, 7, 5], max_draft=8)
    assert d.draft(4) == []


def test_the_newest_occurrence_wins():
    d = NgramDrafter([1, 2, 10, 1, 2, 20, 1, 2], max_draft=8)
    assert d.draft(1) == [20]


def test_limits_cap_the_draft():
    prompt = list(range(50)) + list(range(10))
    assert NgramDrafter(prompt, max_draft=4).draft(10) == [10, 11, 12, 13]
    assert NgramDrafter(prompt, max_draft=32).draft(2) == [10, 11]
    assert NgramDrafter(prompt, max_draft=32).draft(0) == []


def test_sync_follows_the_generated_tokens():
    d = NgramDrafter([1, 2, 3, 4, 5, 6], max_draft=8)
    generated = [9, 3]
    d.sync(generated)
    assert d.draft(2) == []             # "9 3" is new; "3" alone is too short
    generated += [4]
    d.sync(generated)
    d.sync(generated)                   # nothing new: nothing appended twice
    assert d.tokens == [1, 2, 3, 4, 5, 6, 9, 3, 4]
    assert d.draft(2) == [5, 6]


def test_acceptance_estimate_sets_the_draft_length():
    d = NgramDrafter(list(range(100)) + list(range(5)), max_draft=MAX_DRAFT)   # ends with a 4-token match
    assert d.p[4] == PRIORS[4]
    assert d.worth_drafting(0.6, 4) == 1              # 0.75 >= 0.6 > 0.75**2
    assert len(d.draft(32, threshold=0.6)) == 1
    for _ in range(6):
        d.record(4, 4)                                # a copy: every drafted token accepted
    assert d.p[4] > 0.95 and d.worth_drafting(0.6, 4) >= 10
    assert len(d.draft(32, threshold=0.6)) == d.worth_drafting(0.6, 4)
    for _ in range(8):
        d.record(2, 0)                                # the text went its own way
    assert d.worth_drafting(0.6, 4) == 0 and d.draft(32, threshold=0.6) == []
    before = d.p[4]
    d.draft(32, threshold=0.6)                        # matches not worth drafting: p drifts back up
    assert before < d.p[4] < PRIORS[4]
    assert d.drafted == 40 and d.accepted == 24


def test_each_match_length_keeps_its_own_estimate():
    """Short matches guessing badly on open text must not stop long ones from drafting a copy;
    and a short match starts less trusted (PRIORS)."""
    d = NgramDrafter([1, 2, 3, 4, 5, 6, 7, 8, 50, 7, 8], max_draft=MAX_DRAFT)  # ends with a 2-token match
    assert PRIORS[2] < PRIORS[4]
    assert d.draft(8, threshold=0.6) == []              # a CPU's threshold: a 2-token match is not worth it
    assert d.draft(8, threshold=0.4) == [50]            # a cheap step's: it is
    for _ in range(6):
        d.record(1, 0)
    assert d.p[2] < 0.4 and d.draft(8, threshold=0.4) == []
    d.extend([1, 2, 3, 4])                              # now a 4-token match: its estimate is untouched
    assert d.p[4] == PRIORS[4] and d.draft(8, threshold=0.4) == [5, 6, 7]   # 0.75**3 >= 0.4 > 0.75**4


def test_step_cost_fits_fixed_and_per_token_time():
    cost = StepCost()
    assert cost.ratio() == PRIOR_RATIO
    for _ in range(5):
        cost.observe(1, 0.009)
    assert cost.ratio() == PRIOR_RATIO   # no spread in n yet: nothing to fit
    for n in (1, 3, 1, 2, 9, 1, 4) * 5:
        cost.observe(n, 0.003 + 0.006 * n)
    assert abs(cost.ratio() - 0.5) < 0.01
    cost.observe(512, 5.0)               # a prompt chunk does not move the fit
    assert abs(cost.ratio() - 0.5) < 0.01
    assert abs(cost.threshold(1, 1) - MARGIN / 1.5) < 0.01
    assert cost.threshold(8, 8) > 0.9    # a busy batch drafts only near-certain tokens
    assert cost.threshold(3, 0) == 1.0


class Drafter:
    def __init__(self, tokens):
        self.tokens = tokens
        self.thresholds = []

    def sync(self, generated):
        pass

    def draft(self, limit, threshold=0.0):
        self.thresholds.append(threshold)
        return self.tokens[:max(limit, 0)]


def decoding(s: Scheduler, prompt, drafter, max_tokens=None, generated=0):
    seq = Sequence(Request(prompt_tokens=prompt, sampling=SamplingParams(max_tokens=max_tokens)), prompt,
                   stream=None)
    seq.drafter = drafter
    s.add(seq)
    s.admit()
    seq.status, seq.n_past, seq.next_token = Status.DECODE, len(prompt), 42
    seq.generated = [7] * generated
    s.slots[seq.slot].extend(prompt)
    return seq


def test_drafts_ride_on_the_decode_token():
    s = Scheduler(KvPool(2), n_batch=64)
    seq = decoding(s, [1, 2, 3], Drafter([5, 6, 7]))
    (item,) = s.plan()
    assert item.tokens == [42, 5, 6, 7] and item.draft == [5, 6, 7] and item.pos == 3
    assert 0 < seq.drafter.thresholds[0] < 1


def test_drafts_stay_inside_max_tokens_context_batch_and_free_cells():
    s = Scheduler(KvPool(1), n_batch=64)
    decoding(s, [1, 2, 3], Drafter(list(range(100, 130))), max_tokens=10, generated=7)
    assert s.plan()[0].draft == [100, 101]      # tokens 8 (the decode one), 9, 10

    s = Scheduler(KvPool(1), n_batch=64, n_ctx_seq=8)
    decoding(s, [1, 2, 3], Drafter(list(range(100, 130))))
    assert s.plan()[0].draft == [100, 101, 102]  # positions 3..6; the last cell stays for the next token

    s = Scheduler(KvPool(1), n_batch=3)
    decoding(s, [1, 2, 3], Drafter(list(range(100, 130))))
    assert s.plan()[0].draft == [100, 101]

    s = Scheduler(KvPool(1, pool_cells=6), n_batch=64)
    decoding(s, [1, 2, 3], Drafter(list(range(100, 130))))
    assert s.plan()[0].draft == [100, 101]      # 3 cells held, the decode token takes one

    s = Scheduler(KvPool(3), n_batch=512)
    for i in range(3):
        decoding(s, [i, 1, 2], Drafter(list(range(100, 130))))
    assert sum(len(it.draft) for it in s.plan()) == MAX_DRAFT_TOKENS_PER_STEP


def test_no_drafts_while_the_cpu_governor_compares_steps():
    s = Scheduler(KvPool(2), n_batch=64)
    seq = decoding(s, [1, 2, 3], Drafter([5, 6, 7]))
    (item,) = s.plan(drafts=False)
    assert item.tokens == [42] and item.draft == [] and seq.drafter.thresholds == []


def test_no_drafts_for_prompts_or_without_a_drafter():
    s = Scheduler(KvPool(2), n_batch=64)
    plain = decoding(s, [1, 2, 3], None)
    prefilling = Sequence(Request(prompt_tokens=[4, 5, 6], sampling=SamplingParams()), [4, 5, 6], stream=None)
    prefilling.drafter = Drafter([9, 9])
    s.add(prefilling)
    s.admit()
    items = s.plan()
    assert [it.seq for it in items] == [plain, prefilling]
    assert all(it.draft == [] for it in items) and prefilling.drafter.thresholds == []
