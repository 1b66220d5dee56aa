"""Finish rules after each decode, with fake sequences and a fake vocabulary (no model)."""

import time

import pytest

from edge_infer.engine.postprocess import NO_ALLOWED_TOKEN, Sampled, postprocess_token
from edge_infer.engine.sampling import SamplingParams
from edge_infer.engine.kv.pool import KvPool
from edge_infer.engine.scheduler import BatchItem, Scheduler
from edge_infer.engine.sequence import Request, Sequence, Status

EOG = 0


class FakeVocab:
    """Token t reads as the character chr(ord('a') + t - 1); token 0 ends generation."""

    def is_eog(self, token: int) -> bool:
        return token == EOG

    def token_to_bytes(self, token: int) -> bytes:
        return {EOG: b"", 90: "é".encode()[:1], 91: "é".encode()[1:]}.get(token, bytes([96 + token]))


VOCAB = FakeVocab()


def queued(prompt=(1, 2, 3), forced=None, **sampling):
    return Sequence(Request(prompt_tokens=list(prompt), sampling=SamplingParams(**sampling), forced_tokens=forced),
                    list(prompt), stream=None)


def seq(prompt=(1, 2, 3), forced=None, **sampling):
    """A sequence whose prompt is evaluated: it is generating."""
    s = queued(prompt, forced, **sampling)
    s.status, s.n_past = Status.DECODE, len(prompt)
    return s


def feed(s, token, n_ctx_seq=None):
    return postprocess_token(Sampled(s, token), VOCAB, n_ctx_seq)


def test_a_token_is_appended_streamed_and_fed_back():
    s = seq()
    out = feed(s, 1)
    assert out.finish is None and out.event.token == 1 and out.event.text == "a"
    assert s.generated == [1] and s.next_token == 1


def test_end_of_generation_stops_without_emitting_the_token():
    s = seq()
    out = feed(s, EOG)
    assert (out.finish, out.event, out.flush) == ("stop", None, True)
    assert s.generated == []


def test_ignore_eos_keeps_generating_past_end_of_generation():
    s = seq(ignore_eos=True)
    out = feed(s, EOG)
    assert out.finish is None and s.generated == [EOG] and s.next_token == EOG


def test_a_grammar_ends_at_end_of_generation_even_with_ignore_eos():
    out = feed(seq(ignore_eos=True, grammar='root ::= "a"'), EOG)
    assert out.finish == "stop" and out.event is None


def test_forced_tokens_are_emitted_even_when_they_end_generation():
    s = seq(forced=[EOG, 2])
    assert feed(s, EOG).finish is None
    out = feed(s, 2)
    assert out.finish == "length" and s.generated == [EOG, 2]


def test_a_stop_string_ends_the_sequence_and_drops_what_follows():
    s = seq(stop=("bc",))
    assert feed(s, 1).event.text == "a"
    held = feed(s, 2)
    assert held.event.text == "" and held.finish is None  # "b" may start the stop string
    out = feed(s, 3)
    assert (out.finish, out.flush, out.event.text) == ("stop", False, "")


def test_max_tokens_ends_with_length():
    s = seq(max_tokens=2)
    assert feed(s, 1).finish is None
    out = feed(s, 2)
    assert out.finish == "length" and out.event.token == 2 and s.generated == [1, 2]


def test_the_context_limit_ends_with_length():
    s = seq(prompt=[1, 2, 3, 4], max_tokens=None)
    assert feed(s, 1, n_ctx_seq=5).finish is None
    s.n_past = 5  # the sampled token was fed back: the sequence holds all it may
    out = feed(s, 2, n_ctx_seq=5)
    assert out.finish == "length" and out.event.token == 2


def test_no_allowed_token_fails_the_sequence():
    s = seq()
    out = feed(s, None)
    assert (out.finish, out.error, out.event) == ("error", NO_ALLOWED_TOKEN, None)
    assert s.generated == []


def test_a_character_split_across_tokens_is_streamed_once_whole():
    s = seq()
    assert feed(s, 90).event.text == ""
    assert feed(s, 91).event.text == "é"


def test_end_releases_text_held_back_unless_stopped():
    s = seq(stop=("bc",))
    feed(s, 2)
    assert s.end(flush=True) == "b" and s.stats.generated_tokens == 1
    t = seq(stop=("bc",))
    feed(t, 2)
    assert t.end(flush=False) == ""


def test_scheduler_postprocess_uses_its_context_limit():
    sched = Scheduler(KvPool(2), n_batch=8, n_ctx_seq=4)
    a, b = seq(prompt=[1, 2, 3]), seq(prompt=[1, 2, 3, 4])
    outs = list(sched.postprocess([Sampled(a, 5), Sampled(b, 5)], VOCAB))
    assert [o.seq for o in outs] == [a, b]
    assert [o.finish for o in outs] == [None, "length"]


def test_decoded_records_the_cache_and_returns_what_to_sample():
    sched = Scheduler(KvPool(2), n_batch=8)
    long, short = queued(prompt=list(range(6))), queued(prompt=[7, 8])
    for s in (long, short):
        sched.add(s)
    sched.admit()
    items = [BatchItem(long, [0, 1, 2, 3], 0, False), BatchItem(short, [7, 8], 0, True)]
    assert sched.decoded(items) == [items[1]]
    assert long.status is Status.PREFILL and long.n_past == 4
    assert short.status is Status.DECODE and short.n_past == 2
    assert sched.slots[long.slot].cached == [0, 1, 2, 3]


@pytest.mark.parametrize("why", ["cancelled", "abandoned", "deadline"])
def test_take_dropped_ends_waiting_and_running_sequences(why):
    sched = Scheduler(KvPool(1), n_batch=8)
    running, waiting, kept = queued(), queued(), queued()
    for s in (running, waiting, kept):
        sched.add(s)
    sched.admit()
    for s in (running, waiting):
        if why == "deadline":
            s.deadline = time.perf_counter() - 1
        else:
            setattr(s, why, True)
    assert sched.take_dropped(time.perf_counter()) == [waiting, running]
    assert list(sched.waiting) == [kept] and sched.running == [running]
