"""Tool calls and reasoning through the real server with the official openai client on the
real SmolLM2: forced calls validate against their schema, a call -> result -> answer round
trip, streamed deltas reassemble to the whole reply, parallel calls, malformed calls fall
back to content, <think> becomes reasoning_content. (SmolLM2's template has no tool
support: it is shown the tools Hermes-style and its calls are parsed as Hermes.)"""

from __future__ import annotations

import json

import httpx
import jsonschema
import pytest

from tests.server.test_errors import error_of

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "minLength": 1, "maxLength": 40},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"], "additionalProperties": False}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "Current time in a time zone",
    "parameters": {"type": "object", "properties": {"zone": {"type": "string", "maxLength": 40}},
                   "required": ["zone"], "additionalProperties": False}}}
CITIES = ["Oslo", "Paris", "Lima", "Tokyo", "Cairo", "Perth", "Quito", "Rome", "Dakar", "Hanoi"]


def ask(city: str) -> list[dict]:
    return [{"role": "user", "content": f"What is the weather in {city}?"}]


def reassemble(chunks) -> tuple[str, list[dict], str | None, str]:
    """(content, tool calls, reasoning, finish_reason) from streamed chunks."""
    content, reasoning, calls, reason = "", None, {}, None
    for chunk in chunks:
        for choice in chunk.choices:
            d = choice.delta
            content += d.content or ""
            extra = (d.model_extra or {}).get("reasoning_content")
            if extra is not None:
                reasoning = (reasoning or "") + extra
            for tc in d.tool_calls or ():
                call = calls.setdefault(tc.index, {"id": None, "name": None, "arguments": ""})
                if tc.id:
                    assert call["id"] is None, "a call's id is sent once"
                    call["id"] = tc.id
                if tc.function and tc.function.name:
                    assert call["name"] is None, "a call's name is sent once"
                    call["name"] = tc.function.name
                if tc.function and tc.function.arguments:
                    call["arguments"] += tc.function.arguments
            reason = choice.finish_reason or reason
    return content, [calls[i] for i in sorted(calls)], reasoning, reason


def test_a_required_call_validates_against_its_schema_20_of_20(client):
    valid = 0
    for i in range(20):
        out = client.chat.completions.create(
            model="smollm2", messages=ask(CITIES[i % 10]), tools=[WEATHER, TIME], max_tokens=120,
            tool_choice="required" if i % 2 else {"type": "function", "function": {"name": "get_weather"}},
            parallel_tool_calls=False, temperature=0.7, seed=i)
        choice = out.choices[0]
        assert choice.finish_reason == "tool_calls" and len(choice.message.tool_calls) == 1
        call = choice.message.tool_calls[0]
        assert call.id.startswith("call_") and call.type == "function"
        schema = {"get_weather": WEATHER, "get_time": TIME}[call.function.name]["function"]["parameters"]
        jsonschema.validate(json.loads(call.function.arguments), schema)
        if i % 2 == 0:
            assert call.function.name == "get_weather"
        valid += 1
    assert valid == 20


def test_a_call_result_answer_round_trip(client):
    first = client.chat.completions.create(model="smollm2", messages=ask("Oslo"), tools=[WEATHER],
                                           tool_choice="required", max_tokens=60, temperature=0)
    call = first.choices[0].message.tool_calls[0]
    history = ask("Oslo") + [
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temperature": 7, "sky": "rain"})}]
    final = client.chat.completions.create(model="smollm2", messages=history, tools=[WEATHER],
                                           tool_choice="none", max_tokens=24, temperature=0)
    assert final.choices[0].finish_reason in ("stop", "length")
    assert final.choices[0].message.content and not final.choices[0].message.tool_calls
    unmatched = history[:-1] + [{"role": "tool", "tool_call_id": "call_nobody", "content": "7"}]
    r = httpx.post(str(client.base_url) + "chat/completions", json={
        "model": "smollm2", "messages": unmatched, "tools": [WEATHER]})
    assert r.status_code == 400 and error_of(r)["param"].endswith("tool_call_id")


@pytest.mark.parametrize("choice, parallel", [("required", False), ("required", True), ("auto", True)])
def test_streamed_deltas_reassemble_to_the_whole_reply(client, choice, parallel):
    # No drafts: how far a draft runs follows measured step times, and a draft's positions,
    # evaluated in one batch, round differently from one at a time, so two greedy runs can
    # part at a near tie (read: 'length' then 'tool_calls'). This test is about the stream.
    # For the same reason both compared requests start from the same cached cells: the first one
    # asked puts the prompt in a slot, and the two after it reuse all of it but its last token
    # (a prefix restored from another conversation's cells, then eight tokens evaluated in one
    # batch, read '"LIMA", "unit"' where the slot's read '"LIMA" ,"unit"').
    body = dict(model="smollm2", messages=ask("Lima"), tools=[WEATHER, TIME], tool_choice=choice,
                parallel_tool_calls=parallel, max_tokens=80, temperature=0, extra_body={"speculative": False})
    client.chat.completions.create(**body)
    whole = client.chat.completions.create(**body).choices[0]
    content, calls, _, reason = reassemble(client.chat.completions.create(**body, stream=True))
    assert reason == whole.finish_reason
    assert content == (whole.message.content or "")
    # the same text, byte for byte (a call cut by max_tokens keeps its partial arguments)
    assert [(c["name"], c["arguments"]) for c in calls] == [
        (c.function.name, c.function.arguments) for c in whole.message.tool_calls or ()]
    assert all(c["id"].startswith("call_") for c in calls)
    if choice == "required":  # SmolLM2 repeats calls when it may: cut by max_tokens then
        assert calls
        assert reason in (("tool_calls",) if not parallel else ("tool_calls", "length"))
        if not parallel:
            assert len(calls) == 1
        else:
            assert len(calls) >= 1


def grammar_reply(client, text: str, stream: bool, **extra):
    """The model forced (by a grammar) to write `text` exactly: parsing on known text."""
    grammar = "root ::= " + json.dumps(text)
    return client.chat.completions.create(model="smollm2", messages=ask("Rome"), max_tokens=80,
                                          temperature=0, stream=stream, extra_body={"grammar": grammar, **extra},
                                          **({"tools": [WEATHER]} if "tools" not in extra else {}))


def test_a_malformed_call_is_content_and_never_breaks_the_stream(client):
    text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"</tool_call> sorry'
    whole = grammar_reply(client, text, False).choices[0]
    assert whole.message.content == text and not whole.message.tool_calls and whole.finish_reason == "stop"
    content, calls, _, reason = reassemble(grammar_reply(client, text, True))
    assert content == text and calls == [] and reason == "stop"


def test_a_well_formed_call_in_text_is_parsed(client):
    text = 'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome", "unit": "celsius"}}\n</tool_call>'
    whole = grammar_reply(client, text, False).choices[0]
    assert whole.finish_reason == "tool_calls" and whole.message.content == "Let me check."
    assert json.loads(whole.message.tool_calls[0].function.arguments) == {"city": "Rome", "unit": "celsius"}
    content, calls, _, reason = reassemble(grammar_reply(client, text, True))
    assert (content, reason) == ("Let me check.", "tool_calls") and calls[0]["name"] == "get_weather"


def test_think_blocks_become_reasoning_content(client):
    text = "<think>The user wants weather.</think>It is sunny."
    whole = grammar_reply(client, text, False, tools=None).choices[0]
    assert whole.message.content == "It is sunny."
    assert whole.message.model_extra["reasoning_content"] == "The user wants weather."
    content, _, reasoning, _ = reassemble(grammar_reply(client, text, True, tools=None))
    assert (content, reasoning) == ("It is sunny.", "The user wants weather.")
    kept = grammar_reply(client, text, False, tools=None, reasoning_format="none").choices[0]
    assert kept.message.content == text and "reasoning_content" not in (kept.message.model_extra or {})
    dropped = grammar_reply(client, text, False, tools=None, include_reasoning=False).choices[0]
    assert dropped.message.content == "It is sunny." and "reasoning_content" not in (dropped.message.model_extra or {})


def asked_to_call(city: str) -> list[dict]:
    """A request SmolLM2 answers with a call about half the time at temperature 0.7, sometimes
    after some text ('{#tool_call}\n<tool_call>...'), 5 of 9 seeds at n_batch 512 and 32 alike.
    Asked to "use the get_weather tool" it called for 3 of 8 seeds, 2 at n_batch 32 (other
    rounding, other samples) and none in a full suite run: these tests then had no call to check."""
    call = json.dumps({"name": "get_weather", "arguments": {"city": city, "unit": "celsius"}})
    return [{"role": "user", "content": f"Reply with exactly this text and nothing else:\n<tool_call>\n{call}\n</tool_call>"}]


def test_under_auto_a_call_once_begun_follows_its_schema(client):
    """tool_choice auto, Hermes syntax: the reply may talk or call; once it writes
    <tool_call> the rest is grammar-constrained, so no call comes back malformed."""
    calls = 0
    for i, city in enumerate(CITIES):
        out = client.chat.completions.create(
            model="smollm2", tools=[WEATHER], max_tokens=80, temperature=0.7, seed=i,
            messages=asked_to_call(city))
        message = out.choices[0].message
        assert "<tool_call>" not in (message.content or "")          # every call that began parsed
        for call in message.tool_calls or ():
            jsonschema.validate(json.loads(call.function.arguments), WEATHER["function"]["parameters"])
            calls += 1
    assert calls >= 1


def test_under_auto_a_begun_call_streams_its_arguments_as_written(client):
    """The engine tells the stream where the call grammar took over: from there the call's
    name goes out once and its arguments in fragments, as in a forced reply."""
    streamed = 0
    for i, city in enumerate(CITIES):
        chunks = list(client.chat.completions.create(
            model="smollm2", tools=[WEATHER], max_tokens=80, temperature=0.7, seed=i, stream=True,
            messages=asked_to_call(city)))
        pieces = [tc for ch in chunks for c in ch.choices for tc in (c.delta.tool_calls or ())]
        first = [p for p in pieces if p.index == 0]
        if not first:
            continue
        fragments = [p.function.arguments for p in first[1:] if p.function and p.function.arguments]
        assert first[0].function.name == "get_weather" and len(fragments) >= 3, fragments
        jsonschema.validate(json.loads("".join(fragments)), WEATHER["function"]["parameters"])
        streamed += 1
    assert streamed >= 1


def test_tools_too_large_for_a_grammar_are_called_unconstrained_under_auto():
    """Two dozen big schemas (an agent's tools) make a call grammar over the size limit: under
    auto the request still runs, its calls read as written, instead of a 400."""
    from edge_infer.chat import HERMES
    from edge_infer.server.jobs import call_constraint
    from edge_infer.server.schemas import ChatCompletionRequest

    wide = {"type": "object", "properties": {f"p{i}": {"anyOf": [{"type": "string"}, {"type": "integer"},
                                                                  {"type": "array", "items": {"type": "string"}}]}
                                             for i in range(40)}}
    tools = [{"type": "function", "function": {"name": f"tool{i}", "parameters": wide}} for i in range(24)]
    body = ChatCompletionRequest(messages=[{"role": "user", "content": "hi"}], tools=tools)
    assert call_constraint(HERMES, body) == {}
    small = ChatCompletionRequest(messages=[{"role": "user", "content": "hi"}], tools=tools[:1])
    assert call_constraint(HERMES, small)["call_trigger"] == "<tool_call>"
