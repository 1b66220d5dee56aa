"""llama-server's token utilities (/tokenize, /detokenize, /apply-template) on SmolLM2."""

from __future__ import annotations

import httpx
import pytest

ASK = [{"role": "user", "content": "Hi there"}]


@pytest.fixture(scope="module")
def live(make_served):
    return make_served()


def test_tokenize_and_detokenize_round_trip(live):
    text = "Hello world <|im_end|>"
    r = httpx.post(live.url + "/tokenize", json={"content": text})
    tokens = r.json()["tokens"]
    assert r.status_code == 200 and tokens == live.engine.model.tokenize(text, False)
    assert live.engine.model.detokenize(tokens, special=True) == text
    assert httpx.post(live.url + "/detokenize", json={"tokens": tokens}).json() == {"content": text}
    # <|im_end|> is one special token; as plain text it is several
    assert len(httpx.post(live.url + "/tokenize", json={"content": text, "parse_special": False}).json()["tokens"]) \
        > len(tokens)
    pieces = httpx.post(live.url + "/tokenize", json={"content": text, "with_pieces": True}).json()["tokens"]
    assert [p["id"] for p in pieces] == tokens and "".join(p["piece"] for p in pieces) == text
    with_bos = httpx.post(live.url + "/tokenize", json={"content": text, "add_special": True}).json()["tokens"]
    assert with_bos[1:] == tokens or with_bos == tokens  # a BOS only where the model wants one


def test_apply_template_is_the_prompt_a_chat_request_tokenizes(live):
    prompt = httpx.post(live.url + "/apply-template", json={"messages": ASK}).json()["prompt"]
    assert prompt.endswith("<|im_start|>assistant\n") and "Hi there" in prompt
    assert live.engine.tokenize_messages(ASK) == live.engine.model.tokenize(prompt, False)


def test_apply_template_honours_add_generation_prompt(live):
    # llama-server's field (llama.cpp's test_template.py::test_add_generation_prompt): without
    # it the conversation so far, with no assistant opening; it was always added before.
    def prompt(**extra):
        return httpx.post(live.url + "/apply-template", json={"messages": ASK, **extra}).json()["prompt"]
    opened = prompt(add_generation_prompt=True)
    closed = prompt(add_generation_prompt=False)
    assert opened == prompt() and opened.endswith("<|im_start|>assistant\n")
    assert "Hi there" in closed and "<|im_start|>assistant" not in closed
    assert opened.startswith(closed)


def test_bad_input_is_refused_with_the_field(live):
    n_vocab = live.engine.model.n_vocab
    r = httpx.post(live.url + "/detokenize", json={"tokens": [1, n_vocab]})
    assert r.status_code == 400 and r.json()["error"]["param"] == "tokens[1]"
    r = httpx.post(live.url + "/detokenize", json={"tokens": [-1]})
    assert r.status_code == 400 and "outside the vocabulary" in r.json()["error"]["message"]
    assert httpx.post(live.url + "/tokenize", json={"content": 5}).status_code == 400
    assert httpx.post(live.url + "/apply-template", json={"messages": []}).status_code == 400
    assert httpx.post(live.url + "/tokenize", json={"content": "x", "model": "nope"}).status_code == 404


def test_infill_on_a_model_without_fim_tokens_says_so(live):
    r = httpx.post(live.url + "/infill", json={"input_prefix": "def f():\n", "input_suffix": "\n"})
    assert r.status_code == 400 and "fill-in-the-middle" in r.json()["error"]["message"]
    r = httpx.post(live.url + "/v1/completions", json={"prompt": "def f():\n", "suffix": "\n"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "suffix"
    r = httpx.post(live.url + "/v1/completions", json={"prompt": ["a", "b"], "suffix": "\n"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "prompt"
