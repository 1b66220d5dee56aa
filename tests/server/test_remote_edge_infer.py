"""Another edge-infer (real SmolLM2) as a remote model behind a front server: the same
answers through the front as from it directly, on OpenAI's, Ollama's and Anthropic's
routes with their real clients; a client leaving the front frees the remote's slot."""

from __future__ import annotations

import time

import anthropic
import openai
import pytest

from tests.remote.conftest import Front

import ollama
ASK = [{"role": "user", "content": "Name three colours."}]
GREEDY = dict(temperature=0, max_tokens=24, extra_body={"speculative": False})


@pytest.fixture(scope="module")
def front(served):
    f = Front({"big": {"remote": [served.base], "remote_model": "smollm2"}})
    yield f
    f.stop()


def test_the_front_answers_what_the_remote_answers(served, front):
    direct = openai.OpenAI(base_url=served.base, api_key="x", max_retries=0)
    via = openai.OpenAI(base_url=front.url + "/v1", api_key="x", max_retries=0)
    want = direct.chat.completions.create(model="smollm2", messages=ASK, **GREEDY)
    got = via.chat.completions.create(model="big", messages=ASK, **GREEDY)
    assert got.choices[0].message.content == want.choices[0].message.content
    assert got.usage.completion_tokens == want.usage.completion_tokens
    chunks = list(via.chat.completions.create(model="big", messages=ASK, stream=True,
                                              stream_options={"include_usage": True}, **GREEDY))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == want.choices[0].message.content
    assert chunks[-1].usage.completion_tokens == want.usage.completion_tokens  # the remote's usage

    o = ollama.Client(host=front.url).chat(model="big", messages=ASK, options={"temperature": 0, "num_predict": 8})
    assert o.message.content and o.done
    # Anthropic's default temperature is 1: a sampled reply may end before max_tokens.
    a = anthropic.Anthropic(base_url=front.url, api_key="x", max_retries=0).messages.create(
        model="big", max_tokens=8, messages=ASK)
    assert a.content[0].text and 0 < a.usage.output_tokens <= 8


def test_a_client_leaving_the_front_frees_the_remotes_slot(served, front):
    via = openai.OpenAI(base_url=front.url + "/v1", api_key="x", max_retries=0)
    stream = via.chat.completions.create(model="big", messages=ASK, stream=True, max_tokens=400,
                                         extra_body={"ignore_eos": True})
    next(iter(stream))
    assert served.engine.snapshot().running == 1
    stream.close()
    deadline = time.monotonic() + 10
    while served.engine.snapshot().running:
        assert time.monotonic() < deadline, "the remote kept generating for a client that left"
        time.sleep(0.05)
