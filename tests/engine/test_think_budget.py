"""The reasoning budget on the real SmolLM2 with an R1-style template (it opens <think> in the
prompt): after N reasoning tokens the engine writes the close marker and the model answers;
a request may end its reasoning at any time (the TUI's key)."""

from __future__ import annotations

import pytest

from edge_infer.engine import Request, SamplingParams

R1_LIKE = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
           "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}")
ASK = [{"role": "user", "content": "What is 2 + 2?"}]


@pytest.fixture(scope="module")
def thinker(make_engine, tmp_path_factory):
    path = tmp_path_factory.mktemp("tmpl") / "r1.jinja"
    path.write_text(R1_LIKE)
    return make_engine(chat_template=str(path), reasoning_budget=6)


def close_tokens(engine) -> list[int]:
    return list(engine.prompts.think_budget(Request(messages=ASK)).close_tokens)


def test_after_the_budget_the_engine_closes_the_block_and_the_model_answers(thinker):
    close = close_tokens(thinker)
    c = thinker.generate(Request(messages=ASK, sampling=SamplingParams(temperature=0.0, max_tokens=24)))
    assert c.tokens[6:6 + len(close)] == close  # six reasoning tokens (the server's budget), then </think>
    reasoning, _, answer = c.text.partition("</think>")
    assert answer.strip() and len(c.tokens) > 6 + len(close)


def test_a_request_sets_its_own_budget_and_zero_answers_at_once(thinker):
    close = close_tokens(thinker)
    c = thinker.generate(Request(messages=ASK, reasoning_budget=2,
                                 sampling=SamplingParams(temperature=0.0, max_tokens=12)))
    assert c.tokens[2:2 + len(close)] == close
    at_once = thinker.generate(Request(messages=ASK, reasoning_budget=0,
                                       sampling=SamplingParams(temperature=0.0, max_tokens=12)))
    assert at_once.tokens[:len(close)] == close and at_once.text.lstrip().startswith("</think>")
    free = thinker.generate(Request(messages=ASK, reasoning_budget=-1,
                                    sampling=SamplingParams(temperature=0.0, max_tokens=12)))
    assert free.tokens[6:6 + len(close)] != close  # no limit: the model's own tokens


def test_end_reasoning_closes_the_block_at_the_next_token(thinker):
    close = close_tokens(thinker)
    stream = thinker.submit(Request(messages=ASK, reasoning_budget=-1,
                                    sampling=SamplingParams(temperature=0.0, max_tokens=20)))
    tokens = []
    for ev in stream:
        if hasattr(ev, "token"):
            tokens.append(ev.token)
            if len(tokens) == 3:
                stream.end_reasoning()
    assert close == tokens[4:4 + len(close)] or close == tokens[3:3 + len(close)]
