"""Gemma 3: sliding-window layers, its own turn format, batching and prefix reuse."""

import numpy as np
import pytest

from edge_infer.engine import Request, SamplingParams

from .test_batching import PROMPTS, kl

RIVER = "The river flows to the sea and the sea returns as rain. "


@pytest.fixture(scope="module")
def gemma(make_engine, gemma3_path):
    return make_engine(gemma3_path, parallel=4, ctx=1024)


def test_gemma_uses_its_turn_format(gemma):
    assert gemma.model.n_swa == 512
    text = gemma.template.render([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}])
    assert text == "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n"
    tokens = gemma.tokenize_messages([{"role": "user", "content": "Hi"}])
    assert tokens[0] == gemma.model.bos and tokens[1] != gemma.model.bos  # one BOS, not two
    c = gemma.generate(Request(messages=[{"role": "user", "content": "Name a colour."}],
                               sampling=SamplingParams(temperature=0, max_tokens=12)))
    assert c.tokens and c.error is None


def test_gemma_batched_distributions_match_solo(gemma, make_engine, gemma3_path):
    greedy = SamplingParams(temperature=0.0, max_tokens=12, ignore_eos=True)
    streams = [gemma.submit(Request(prompt=p, sampling=greedy, capture_logprobs=True)) for p in PROMPTS[:4]]
    together = [s.result() for s in streams]
    solo = make_engine(gemma3_path, parallel=1, ctx=1024)
    for prompt, run in zip(PROMPTS[:4], together):
        alone = solo.generate(Request(prompt=prompt, forced_tokens=run.tokens, capture_logprobs=True))
        worst = max(kl(a, b) for a, b in zip(run.logprobs, alone.logprobs))
        assert worst < 0.05, f"{prompt!r}: KL {worst:.4f}"


def test_gemma_reuses_prefix_inside_the_window(gemma):
    greedy = SamplingParams(temperature=0, max_tokens=8)
    history = [{"role": "user", "content": "What is DNA?"}]
    first = gemma.generate(Request(messages=history, sampling=greedy))
    history += [{"role": "assistant", "content": first.text}, {"role": "user", "content": "And RNA?"}]
    second = gemma.generate(Request(messages=history, sampling=greedy))
    assert second.stats.cached_tokens >= len(gemma.tokenize_messages(history[:1]))


def test_gemma_falls_back_when_the_window_dropped_the_prefix(make_engine, gemma3_path):
    """After a long prompt the sliding-window cache has reused the cells of early positions;
    a prompt that shares only the beginning cannot reuse it and must be evaluated in full."""
    engine = make_engine(gemma3_path, parallel=1, ctx=2048)
    long_prompt = RIVER * 110
    engine.generate(Request(prompt=long_prompt, sampling=SamplingParams(temperature=0, max_tokens=2)))
    assert engine.ctx.seq_pos_min(0) > 0  # the premise: early positions are gone from the SWA cache
    branch = RIVER * 10 + "Then the story changed completely."
    after = engine.generate(Request(prompt=branch, forced_tokens=engine.tokenize(" and the river"),
                                    capture_logprobs=True))
    assert after.stats.cached_tokens == 0
    assert after.stats.prompt_eval_tokens == after.stats.prompt_tokens
    fresh = make_engine(gemma3_path, parallel=1, ctx=2048)
    ref = fresh.generate(Request(prompt=branch, forced_tokens=after.tokens, capture_logprobs=True))
    assert max(kl(a, b) for a, b in zip(after.logprobs, ref.logprobs)) < 0.05
    assert np.isfinite(after.logprobs[0]).all()
