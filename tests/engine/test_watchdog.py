"""Every request ends: a sampler with no allowed token, and a llama.cpp call that hangs."""

import threading
import time

import llama_cpp
import pytest

from edge_infer.engine import Request, SamplingParams
from edge_infer.engine import sampling
from edge_infer.engine.native.context import ContextParams, LlamaBatch, LlamaContext
from edge_infer.engine.native.llama import LlamaModel
from edge_infer.engine.native.sampler import SamplerChain
from edge_infer.errors import EngineClosedError

GREEDY = SamplingParams(temperature=0.0, max_tokens=8)


def test_checked_sampling_refuses_a_token_the_grammar_rejected(smollm2_path):
    """llama.cpp's own sample() would accept a rejected token here and abort the process."""
    model = LlamaModel(smollm2_path)
    ctx = LlamaContext(model, ContextParams(n_ctx=64, n_seq_max=1, n_batch=8, n_threads=2))
    batch, chain = LlamaBatch(8), SamplerChain()
    try:
        # Bypasses our grammar checks on purpose: token 100000 is past SmolLM2's vocabulary,
        # so every candidate is rejected.
        chain.add(llama_cpp.llama_sampler_init_grammar(model.vocab, b"root ::= <[100000]>", b"root"))
        chain.add(llama_cpp.llama_sampler_init_greedy())
        batch.add(model.bos, 0, 0, True)
        assert ctx.decode(batch) == 0
        assert chain.sample_checked(ctx, 0, model.n_vocab) is None
        # The same chain without the impossible grammar picks a real token.
        plain = SamplerChain().add(llama_cpp.llama_sampler_init_greedy())
        assert 0 <= plain.sample_checked(ctx, 0, model.n_vocab) < model.n_vocab
        plain.close()
    finally:
        chain.close()
        batch.close()
        ctx.close()
        model.close()


def test_a_sequence_with_no_allowed_token_fails_alone(make_engine, monkeypatch):
    engine = make_engine(parallel=2)
    monkeypatch.setattr(sampling, "_check_tokens", lambda model, refs: None)  # let it through
    doomed = engine.submit(Request(prompt="Hi", sampling=SamplingParams(grammar='root ::= <[0]> "a"', max_tokens=4)))
    other = engine.submit(Request(prompt="Hello", sampling=GREEDY))
    done = doomed.result()
    assert done.finish_reason == "error" and "grammar allows no token" in done.error
    assert other.result().finish_reason in ("stop", "length")
    assert engine.alive and engine.snapshot().slots_busy == 0


def test_a_stalled_step_ends_every_request_and_the_engine_recovers(make_engine):
    engine = make_engine(parallel=2, stall_timeout=1)
    real_decode, release = engine.ctx.decode, threading.Event()

    def stuck_decode(batch):
        release.wait(30)  # a llama.cpp call that does not return (until released)
        return real_decode(batch)

    engine.ctx.decode = stuck_decode
    t0 = time.perf_counter()
    streams = [engine.submit(Request(prompt=p, sampling=GREEDY)) for p in ("One", "Two")]
    ends = [s.result() for s in streams]  # ended by the watchdog, not by the stuck call
    waited = time.perf_counter() - t0
    assert all(e.finish_reason == "timeout" and "no progress" in e.error for e in ends)
    assert waited < 10
    assert engine.state == "stalled" and not engine.alive
    with pytest.raises(EngineClosedError, match="stalled"):  # a stalled engine refuses new requests
        engine.submit(Request(prompt="Three", sampling=GREEDY))
    engine.ctx.decode = real_decode
    release.set()
    for _ in range(100):  # the call returns: the engine frees what was ended and serves again
        if engine.alive:
            break
        time.sleep(0.1)
    assert engine.alive and engine.snapshot().slots_busy == 0
    assert engine.generate(Request(prompt="Four", sampling=GREEDY)).finish_reason in ("stop", "length")
