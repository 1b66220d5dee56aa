"""Anthropic's Messages API (/v1/messages) against the real server and SmolLM2, through
Anthropic's own Python client (`anthropic` from PyPI): the wire is right when it parses it."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.server.conftest import REPEATABLE_GREEDY

import anthropic

ASK = [{"role": "user", "content": "What is the capital of France?"}]
WEATHER = {"name": "get_weather", "description": "Current weather in a city",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
# The 2026 client has no sampling parameters (newer models fix them); they go as extra fields.
COLD = {"extra_body": {"temperature": 0.0}}
GREEDY = {"max_tokens": 24, **COLD}


@pytest.fixture(scope="module")
def live(make_served):
    return make_served({"api_key": "sk-local"}, **REPEATABLE_GREEDY)


@pytest.fixture
def client(live):
    with anthropic.Anthropic(base_url=live.url, api_key="sk-local", max_retries=0) as c:
        yield c


def test_a_message_whole_and_streamed_say_the_same(client):
    whole = client.messages.create(model="smollm2", messages=ASK, **GREEDY)
    assert whole.type == "message" and whole.role == "assistant" and whole.model == "smollm2"
    assert whole.id.startswith("msg_") and whole.stop_reason in ("end_turn", "max_tokens")
    assert [b.type for b in whole.content] == ["text"] and whole.content[0].text.strip()
    assert whole.usage.input_tokens > 10 and 0 < whole.usage.output_tokens <= 24

    with client.messages.stream(model="smollm2", messages=ASK, **GREEDY) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == whole.content[0].text == final.content[0].text
    assert final.usage.input_tokens == whole.usage.input_tokens
    assert final.stop_reason == whole.stop_reason


def test_the_raw_stream_is_anthropics_event_sequence(live):
    body = {"model": "smollm2", "messages": ASK, "stream": True, "max_tokens": 24, "temperature": 0.0}
    with httpx.stream("POST", live.url + "/v1/messages", json=body, headers={"x-api-key": "sk-local"}) as r:
        events = [line[len("event: "):] for line in r.iter_lines() if line.startswith("event: ")]
    assert events[:3] == ["message_start", "ping", "content_block_start"]
    assert events[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert set(events[3:-3]) == {"content_block_delta"}


def test_system_stop_sequences_and_max_tokens(client):
    said = client.messages.create(model="smollm2", system="Answer briefly.", messages=ASK, **GREEDY).content[0].text
    word = said.split()[2]  # greedy: the same reply again, cut at its third word
    m = client.messages.create(model="smollm2", system="Answer briefly.", messages=ASK,
                               stop_sequences=[word], **GREEDY)
    assert m.stop_reason == "stop_sequence" and m.stop_sequence == word
    assert m.content[0].text == said[:said.index(word)]
    cut = client.messages.create(model="smollm2", messages=ASK, max_tokens=2, **COLD)
    assert cut.stop_reason == "max_tokens" and cut.usage.output_tokens == 2


def test_a_tool_round_trip(client):
    """tool_choice any: the model calls the tool; its result goes back as a tool_result block
    and the model answers with text."""
    m = client.messages.create(model="smollm2", messages=[{"role": "user", "content": "Weather in Paris?"}],
                               tools=[WEATHER], tool_choice={"type": "any", "disable_parallel_tool_use": True},
                               **COLD, max_tokens=60)
    assert m.stop_reason == "tool_use"
    calls = [b for b in m.content if b.type == "tool_use"]
    assert len(calls) == 1 and calls[0].name == "get_weather" and isinstance(calls[0].input, dict)
    answer = client.messages.create(model="smollm2", tools=[WEATHER], **COLD, max_tokens=24, messages=[
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": [b.model_dump() for b in m.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": calls[0].id,
                                      "content": "18 C and sunny"}]}])
    assert answer.content and answer.content[0].type == "text" and answer.content[0].text

    # Streamed, the call's arguments come as input_json_delta and parse into the same input.
    with client.messages.stream(model="smollm2", messages=[{"role": "user", "content": "Weather in Paris?"}],
                                tools=[WEATHER], tool_choice={"type": "tool", "name": "get_weather",
                                                              "disable_parallel_tool_use": True},
                                **COLD, max_tokens=60) as stream:
        final = stream.get_final_message()
    streamed = [b for b in final.content if b.type == "tool_use"]
    assert final.stop_reason == "tool_use" and streamed[0].input == calls[0].input


def test_count_tokens_matches_the_prompt_a_message_counts(client):
    n = client.messages.count_tokens(model="smollm2", messages=ASK).input_tokens
    assert n == client.messages.create(model="smollm2", messages=ASK, max_tokens=1, **COLD).usage.input_tokens
    with_tools = client.messages.count_tokens(model="smollm2", messages=ASK, tools=[WEATHER]).input_tokens
    assert with_tools > n


def test_errors_are_anthropics_shape_and_name_the_field(live, client):
    with pytest.raises(anthropic.BadRequestError) as err:
        client.messages.create(model="smollm2", messages=[], max_tokens=8)
    assert err.value.body["type"] == "error" and err.value.body["error"]["type"] == "invalid_request_error"
    assert "messages" in err.value.body["error"]["message"]
    r = httpx.post(live.url + "/v1/messages", headers={"x-api-key": "sk-local"},
                   json={"model": "smollm2", "messages": ASK})  # max_tokens is required, as Anthropic's
    assert r.status_code == 400 and "max_tokens" in r.json()["error"]["message"]
    r = httpx.post(live.url + "/v1/messages", headers={"x-api-key": "sk-local"}, content=b"{not json")
    assert r.status_code == 400 and r.json()["type"] == "error"
    with pytest.raises(anthropic.AuthenticationError):
        with anthropic.Anthropic(base_url=live.url, api_key="wrong", max_retries=0) as bad:
            bad.messages.create(model="smollm2", messages=ASK, max_tokens=4)
    with pytest.raises(anthropic.NotFoundError) as err:
        client.messages.create(model="no-such-model", messages=ASK, max_tokens=4)
    assert err.value.body["error"]["type"] == "not_found_error"
    body = {"model": "smollm2", "max_tokens": 8, "messages": [
        {"role": "user", "content": [{"type": "tool_result", "content": "x"}]}]}
    r = httpx.post(live.url + "/v1/messages", headers={"x-api-key": "sk-local"}, json=body)
    assert r.status_code == 400 and "tool_use_id" in json.dumps(r.json())
