"""OpenAI's Responses API (/v1/responses) against the real server and SmolLM2, through the
`openai` client's responses.create / responses.stream: stateful turns, function calls,
stored responses."""

from __future__ import annotations

import httpx
import openai
import pytest
from openai import OpenAI

from tests.server.conftest import REPEATABLE_GREEDY

WEATHER = {"type": "function", "name": "get_weather", "description": "Current weather in a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


@pytest.fixture(scope="module")
def live(make_served):
    return make_served(**REPEATABLE_GREEDY)


@pytest.fixture
def client(live):
    with OpenAI(base_url=live.base, api_key="unused", max_retries=0) as c:
        yield c


def metric(live, name: str) -> float:
    for line in httpx.get(live.url + "/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")


def test_a_response_whole_and_streamed(client):
    r = client.responses.create(model="smollm2", input="What is the capital of France?", temperature=0,
                                max_output_tokens=24)
    assert r.id.startswith("resp_") and r.object == "response" and r.model == "smollm2"
    assert r.status in ("completed", "incomplete") and r.output_text.strip()
    assert r.usage.input_tokens > 10 and 0 < r.usage.output_tokens <= 24
    with client.responses.stream(model="smollm2", input="What is the capital of France?", temperature=0,
                                 max_output_tokens=64, instructions="Answer in one short sentence.") as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == final.output_text
    # SmolLM2 rambles: cut at max_output_tokens the response is incomplete and says why.
    assert (final.status, final.incomplete_details) in (("completed", None), ("incomplete", None)) or \
        final.incomplete_details.reason == "max_output_tokens"
    assert [item.type for item in final.output] == ["message"]


def test_two_turns_through_previous_response_id_reuse_the_first_turns_kv(client, live):
    first = client.responses.create(model="smollm2", temperature=0, max_output_tokens=48,
                                    instructions="You are terse.", input="My name is Ada. Say hello to me.")
    # instructions do not carry over (OpenAI's rule): a client such as Codex sends them each turn
    second = client.responses.create(model="smollm2", temperature=0, max_output_tokens=24,
                                     instructions="You are terse.", previous_response_id=first.id,
                                     input="What is my name?")
    assert second.previous_response_id == first.id
    # The second prompt holds the first turn: its KV came from the slot, not evaluated again.
    cached = second.usage.input_tokens_details.cached_tokens
    print(f"turn 1: {first.usage.input_tokens} prompt tokens; turn 2: {second.usage.input_tokens} prompt "
          f"tokens, {cached} reused")
    assert second.usage.input_tokens > first.usage.input_tokens + first.usage.output_tokens
    assert cached >= first.usage.input_tokens
    assert client.responses.retrieve(first.id).output_text == first.output_text
    assert metric(live, "edge_infer_responses_stored") >= 2


def test_a_function_call_round_trip(client):
    r = client.responses.create(model="smollm2", input="Weather in Paris?", tools=[WEATHER],
                                tool_choice={"type": "function", "name": "get_weather"},
                                parallel_tool_calls=False, temperature=0, max_output_tokens=60)
    calls = [item for item in r.output if item.type == "function_call"]
    assert len(calls) == 1 and calls[0].name == "get_weather" and calls[0].call_id
    answer = client.responses.create(model="smollm2", previous_response_id=r.id, tools=[WEATHER], temperature=0,
                                     max_output_tokens=24, input=[{"type": "function_call_output",
                                                                    "call_id": calls[0].call_id,
                                                                    "output": "18 C and sunny"}])
    assert answer.output_text.strip()
    # Streamed: the arguments as deltas, the call whole at the end, the same as above.
    with client.responses.stream(model="smollm2", input="Weather in Paris?", tools=[WEATHER],
                                 tool_choice={"type": "function", "name": "get_weather"}, parallel_tool_calls=False,
                                 temperature=0, max_output_tokens=60) as stream:
        kinds = [e.type for e in stream]
        final = stream.get_final_response()
    assert "response.function_call_arguments.delta" in kinds and "response.function_call_arguments.done" in kinds
    streamed = [item for item in final.output if item.type == "function_call"]
    assert streamed[0].arguments == calls[0].arguments


def test_stored_responses_get_delete_and_unknown_ids(client):
    r = client.responses.create(model="smollm2", input="Hi", max_output_tokens=4)
    assert client.responses.retrieve(r.id).id == r.id
    client.responses.delete(r.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(r.id)
    with pytest.raises(openai.NotFoundError) as err:
        client.responses.create(model="smollm2", input="Again?", previous_response_id=r.id, max_output_tokens=4)
    assert err.value.body["param"] == "previous_response_id" and "is stored here" in err.value.body["message"]
    unstored = client.responses.create(model="smollm2", input="Hi", max_output_tokens=4, store=False)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(unstored.id)


def test_bad_input_names_the_field(client):
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model="smollm2", input=[{"type": "function_call_output", "output": "x"}])
    assert err.value.body["param"] == "input[0]"
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model="smollm2", input="Hi", tools=["web_search"])
    assert err.value.body["param"] == "tools[0]"
    # Hosted tools a client lists every turn (Codex: web_search, a namespace of agents) are left
    # out, not refused: nothing here runs them.
    r = client.responses.create(model="smollm2", input="Hi", max_output_tokens=4,
                                tools=[{"type": "web_search"}, {"type": "namespace", "name": "agents", "tools": []}])
    assert r.output
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model="smollm2", input="")
