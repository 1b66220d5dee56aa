"""The official `openai` client against the running server over TCP: the wire format is
right when the client parses it into its own types."""

from __future__ import annotations

import json

import jsonschema
import pytest

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


def test_models_lists_the_loaded_model(client):
    models = client.models.list()
    assert [m.id for m in models.data] == ["smollm2"]
    assert client.models.retrieve("smollm2").id == "smollm2"


def test_chat_completion(client, served):
    r = client.chat.completions.create(model="smollm2", messages=QUESTION, temperature=0, max_tokens=24)
    choice = r.choices[0]
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-")
    assert choice.message.role == "assistant" and choice.message.content
    assert choice.finish_reason in ("stop", "length")
    prompt = len(served.engine.tokenize_messages(QUESTION))
    assert r.usage.prompt_tokens == prompt
    assert 0 < r.usage.completion_tokens <= 24
    assert r.usage.total_tokens == prompt + r.usage.completion_tokens


def test_max_completion_tokens_and_length_finish(client):
    r = client.chat.completions.create(model="smollm2", messages=QUESTION, max_completion_tokens=3,
                                       extra_body={"ignore_eos": True})
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 3


def test_text_completion(client):
    r = client.completions.create(model="smollm2", prompt="The capital of France is", temperature=0, max_tokens=4)
    assert r.object == "text_completion"
    assert "Paris" in r.choices[0].text
    assert r.usage.completion_tokens == 4 and r.choices[0].finish_reason == "length"


def test_text_completion_several_prompts_and_echo(client):
    r = client.completions.create(model="smollm2", prompt=["One, two,", "Red, green,"], temperature=0,
                                  max_tokens=3, n=2, echo=True)
    assert [c.index for c in r.choices] == [0, 1, 2, 3]
    assert r.choices[0].text.startswith("One, two,") and r.choices[3].text.startswith("Red, green,")
    assert r.choices[0].text == r.choices[1].text  # greedy: both choices alike


def test_streaming_chat_matches_the_openai_chunk_format(client):
    stream = client.chat.completions.create(model="smollm2", messages=QUESTION, temperature=0, max_tokens=16,
                                            stream=True, stream_options={"include_usage": True},
                                            logprobs=True, top_logprobs=2)
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(c.object == "chat.completion.chunk" and c.id == chunks[0].id for c in chunks)
    *body, last = chunks
    assert last.choices == [] and last.usage.completion_tokens > 0  # the usage chunk comes last
    assert all(c.usage is None for c in body)
    assert body[-1].choices[0].finish_reason in ("stop", "length")
    text = "".join(c.choices[0].delta.content or "" for c in body)
    whole = client.chat.completions.create(model="smollm2", messages=QUESTION, temperature=0, max_tokens=16,
                                           logprobs=True, top_logprobs=2)
    streamed = [t for c in body if c.choices[0].logprobs for t in c.choices[0].logprobs.content]
    assert "".join(t.token for t in streamed) == text
    # The same answer, streamed or not. The two requests may reuse cached prompt cells computed
    # in different batches (llama.cpp is not batch-invariant), so greedy may part only at a
    # near-tie between the two most likely tokens.
    tokens = [t.token for t in whole.choices[0].logprobs.content]
    parted = next((i for i, (a, b) in enumerate(zip(tokens, [t.token for t in streamed])) if a != b), None)
    if parted is None:
        assert text == whole.choices[0].message.content
        assert last.usage.completion_tokens == whole.usage.completion_tokens
    else:
        top = whole.choices[0].logprobs.content[parted].top_logprobs
        assert top[0].logprob - top[1].logprob < 0.5, f"parted at token {parted} without a near-tie"


def test_streaming_text_completion(client):
    chunks = list(client.completions.create(model="smollm2", prompt="1, 2, 3,", temperature=0, max_tokens=6,
                                            stream=True))
    assert "".join(c.choices[0].text for c in chunks).strip().startswith("4")
    assert chunks[-1].choices[0].finish_reason == "length"


def test_n_choices_stream_interleaved(client):
    stream = client.chat.completions.create(model="smollm2", messages=QUESTION, n=3, max_tokens=8, seed=7,
                                            stream=True, stream_options={"include_usage": True})
    texts, finished = {}, set()
    for chunk in stream:
        for c in chunk.choices:
            texts[c.index] = texts.get(c.index, "") + (c.delta.content or "")
            if c.finish_reason:
                finished.add(c.index)
        if chunk.usage:
            usage = chunk.usage
    assert finished == {0, 1, 2}
    assert usage.completion_tokens <= 24 and usage.prompt_tokens < 40  # the prompt counts once


def test_stop_strings(client):
    r = client.completions.create(model="smollm2", prompt="1, 2, 3, 4, 5,", temperature=0, max_tokens=20, stop=[" 7"])
    assert r.choices[0].finish_reason == "stop"
    assert "7" not in r.choices[0].text and "6" in r.choices[0].text


def test_seed_repeats_and_penalties_accepted(client):
    kw = dict(model="smollm2", messages=[{"role": "user", "content": "Tell me a story."}], temperature=1.0,
              top_p=0.9, max_tokens=12, seed=1234, presence_penalty=0.5, frequency_penalty=0.5)
    a = client.chat.completions.create(**kw).choices[0].message.content
    b = client.chat.completions.create(**kw).choices[0].message.content
    assert a == b


def test_logprobs_chat(client):
    r = client.chat.completions.create(model="smollm2", messages=QUESTION, temperature=0, max_tokens=5,
                                       logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    assert "".join(t.token for t in content) == r.choices[0].message.content
    for t in content:
        assert len(t.top_logprobs) == 3
        assert t.top_logprobs[0].token == t.token  # greedy takes the most likely token
        assert t.logprob <= 0 and bytes(t.bytes).decode() == t.token
        assert [x.logprob for x in t.top_logprobs] == sorted((x.logprob for x in t.top_logprobs), reverse=True)


def test_logprobs_text_completion(client):
    r = client.completions.create(model="smollm2", prompt="The capital of France is", temperature=0, max_tokens=3,
                                  logprobs=2)
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == 3
    assert all(len(t) == 2 for t in lp.top_logprobs)
    assert lp.text_offset == [0, len(lp.tokens[0]), len(lp.tokens[0]) + len(lp.tokens[1])]
    prompt = "The capital of France is"
    echoed = client.completions.create(model="smollm2", prompt=prompt, temperature=0, max_tokens=3, logprobs=0,
                                       echo=True).choices[0]
    assert echoed.text == prompt + r.choices[0].text
    assert echoed.logprobs.text_offset[0] == len(prompt) and echoed.logprobs.top_logprobs == [{}, {}, {}]


PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                                           "languages": {"type": "array", "items": {"type": "string"}, "maxItems": 3}},
          "required": ["name", "age", "languages"], "additionalProperties": False}


def test_json_schema_output_validates(client):
    r = client.chat.completions.create(
        model="smollm2", temperature=0, max_tokens=200,
        messages=[{"role": "user", "content": "Describe a programmer as JSON: name, age, languages."}],
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}})
    data = json.loads(r.choices[0].message.content)
    jsonschema.validate(data, PERSON)


def test_json_schema_streamed_parses_with_pydantic(client):
    from pydantic import BaseModel, Field

    class City(BaseModel):
        city: str = Field(max_length=40)
        country: str = Field(max_length=40)

    stream = client.chat.completions.create(
        model="smollm2", temperature=0.7, seed=3, max_tokens=80, stream=True,
        messages=[{"role": "user", "content": "Name a city and its country in JSON."}],
        response_format={"type": "json_schema", "json_schema": {"name": "city", "schema": City.model_json_schema()}})
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    City.model_validate_json(text)


def test_json_object_mode(client):
    r = client.chat.completions.create(
        model="smollm2", temperature=0, max_tokens=60, response_format={"type": "json_object"},
        messages=[{"role": "user", "content": 'What is the capital of France? Answer as JSON like {"capital": "..."}'}])
    assert r.choices[0].finish_reason == "stop"  # the grammar closed the object, then only EOS fits
    assert isinstance(json.loads(r.choices[0].message.content), dict)


def test_unknown_fields_are_ignored(client):
    r = client.chat.completions.create(model="smollm2", messages=QUESTION, max_tokens=2, user="someone",
                                       metadata={"a": "b"}, store=False, parallel_tool_calls=False,
                                       extra_body={"some_future_field": {"x": 1}})
    assert r.choices[0].message.content is not None
