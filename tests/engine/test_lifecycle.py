"""Cancel, queue limits, context limits and prefix reuse on the real model."""

import time

import pytest

from edge_infer.engine import FinishEvent, Request, SamplingParams, TokenEvent
from edge_infer.errors import ContextOverflowError, QueueFullError

LONG = SamplingParams(temperature=0.0, max_tokens=400, ignore_eos=True)


def test_cancel_frees_slot_for_next_request(make_engine):
    engine = make_engine(parallel=1)
    stream = engine.submit(Request(prompt="Count to one thousand:", sampling=LONG))
    waiting = engine.submit(Request(prompt="Hello", sampling=SamplingParams(temperature=0.0, max_tokens=5)))
    got = 0
    for event in stream:
        if isinstance(event, TokenEvent):
            got += 1
            if got == 3:
                stream.cancel()
    assert stream.finished.reason == "cancelled"
    assert stream.finished.stats.generated_tokens < 400
    # The queued request gets the freed slot and runs to the end.
    done = waiting.result()
    assert done.finish_reason in ("length", "stop") and done.tokens
    snap = engine.snapshot()
    assert snap.slots_busy == 0 and snap.running == 0


def test_cancels_mid_step_leave_every_slots_record_equal_to_its_kv_cells(make_engine):
    """The slots' record of their cached tokens is what prefix reuse trusts: after requests are
    cancelled at random points (while others step beside them), it must still say exactly which
    positions llama.cpp's cache holds for each slot."""
    import random
    import threading

    engine = make_engine(parallel=3)
    rng = random.Random(7)

    def run_and_cancel(i: int) -> None:
        stream = engine.submit(Request(prompt=f"Story {i % 3}: once upon a time", sampling=LONG))
        stop_after = rng.choice([0, 1, 2, 5, 9])
        for n, event in enumerate(stream):
            if n >= stop_after:
                stream.cancel()
        assert stream.finished.reason == "cancelled"

    for _ in range(3):
        threads = [threading.Thread(target=run_and_cancel, args=(i,)) for i in range(5)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    assert engine.snapshot().running == 0
    for slot in engine.scheduler.slots:
        held = engine.ctx.seq_pos_max(slot.id) + 1
        assert held == len(slot.cached), (slot.id, held, len(slot.cached))
        assert not slot.cached or engine.ctx.seq_pos_min(slot.id) == 0
    # and what they record is reused: a slot's whole history sent again evaluates one token
    history = max((s.cached for s in engine.scheduler.slots), key=len)
    again = engine.generate(Request(prompt_tokens=list(history), sampling=SamplingParams(temperature=0, max_tokens=2)))
    assert again.stats.prompt_eval_tokens == 1


def test_cancel_while_queued(make_engine):
    engine = make_engine(parallel=1)
    first = engine.submit(Request(prompt="Tell me a story:", sampling=SamplingParams(temperature=0, max_tokens=30)))
    queued = engine.submit(Request(prompt="Never runs", sampling=LONG))
    queued.cancel()
    assert queued.result().finish_reason == "cancelled"
    assert first.result().finish_reason in ("length", "stop")


def test_full_queue_is_refused_not_waited(make_engine):
    engine = make_engine(parallel=1, queue_size=2)
    streams = [engine.submit(Request(prompt="Go on:", sampling=LONG)) for _ in range(3)]
    with pytest.raises(QueueFullError, match="queue is full"):
        engine.submit(Request(prompt="one too many", sampling=LONG))
    for s in streams:
        s.cancel()
    for s in streams:
        s.result()
    engine.submit(Request(prompt="fits again", sampling=SamplingParams(max_tokens=2))).result()


def test_prompt_longer_than_context_is_refused_before_running(make_engine):
    engine = make_engine(parallel=2, ctx=128)
    with pytest.raises(ContextOverflowError) as err:
        engine.submit(Request(prompt="word " * 300))
    assert "context holds 128" in str(err.value)
    assert str(err.value.prompt_tokens) in str(err.value)
    # The engine still serves.
    assert engine.generate(Request(prompt="Hi", sampling=SamplingParams(max_tokens=3))).tokens


def test_generation_stops_at_the_context_limit(make_engine):
    engine = make_engine(parallel=2, ctx=64)
    prompt_len = len(engine.tokenize("Write a long essay about the sea."))
    c = engine.generate(Request(prompt="Write a long essay about the sea.",
                                sampling=SamplingParams(temperature=0, max_tokens=None, ignore_eos=True)))
    assert c.finish_reason == "length"
    assert prompt_len + len(c.tokens) == 64 + 1  # the last token is emitted, not fed back


def test_multi_turn_chat_reuses_its_history(smol):
    greedy = SamplingParams(temperature=0.0, max_tokens=24)
    history = [{"role": "system", "content": "You are a helpful assistant."},
               {"role": "user", "content": "What is DNA?"}]
    first = smol.generate(Request(messages=history, sampling=greedy, source="chat"))
    history += [{"role": "assistant", "content": first.text}, {"role": "user", "content": "And RNA?"}]
    second = smol.generate(Request(messages=history, sampling=greedy, source="chat"))
    prev = smol.tokenize_messages(history[:2])
    full = smol.tokenize_messages(history)
    # Everything of the first prompt is reused; only the rest is evaluated.
    assert second.stats.cached_tokens >= len(prev)
    assert second.stats.prompt_eval_tokens == len(full) - second.stats.cached_tokens
    # ... and most of the assistant's reply too (it was generated into the same slot).
    assert second.stats.cached_tokens >= len(prev) + len(first.tokens) // 2


def test_identical_prompt_evaluates_one_token(smol):
    req = dict(prompt="The history of the printing press", sampling=SamplingParams(temperature=0, max_tokens=4))
    smol.generate(Request(**req))
    again = smol.generate(Request(**req))
    assert again.stats.prompt_eval_tokens == 1
    assert again.stats.cached_tokens == again.stats.prompt_tokens - 1


def test_snapshot_during_generation(make_engine):
    engine = make_engine(parallel=2)
    s = engine.submit(Request(prompt="Describe the ocean:", sampling=LONG, source="chat"))
    for event in s:
        if isinstance(event, TokenEvent) and len(engine.snapshot().requests) and event.token:
            break
    snap = engine.snapshot()
    assert snap.running == 1 and snap.slots_busy == 1
    assert snap.requests[0].source == "chat" and snap.requests[0].state == "decode"
    assert snap.kv_cells_used > 0 and snap.kv_cells_total >= 2048
    assert snap.rss_bytes > snap.weights_bytes > 50_000_000
    assert snap.kv_bytes > 0
    s.cancel()
    assert s.result().finish_reason == "cancelled"
    time.sleep(0.05)
    assert engine.snapshot().running == 0


def test_the_engine_is_a_served_engine(make_engine):
    """What the host, server and TUI call (engine/api.py), on a real loaded engine."""
    from edge_infer.engine import ServedEngine

    engine = make_engine()
    assert isinstance(engine, ServedEngine)
    for name in ServedEngine.__annotations__:
        assert hasattr(engine, name), name
    assert engine.model.piece(engine.tokenize("Hi")[0]) and engine.embedding_tokens > 0
