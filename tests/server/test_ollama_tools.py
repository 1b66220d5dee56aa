"""Ollama's tool calling on /api/chat against the real server and SmolLM2, through Ollama's
own Python client where it can say it (tool_choice is our extension: sent with httpx and
read back with the client's own ChatResponse)."""

from __future__ import annotations

import json

import httpx
import jsonschema
import pytest

from edge_infer.server import ollama_tools, ollama_wire
from edge_infer.server.ollama_wire import Message

import ollama

from tests.server.test_ollama import client, live  # noqa: F401,E402  (the same server and client fixtures)
from tests.server.test_tool_calls import WEATHER  # noqa: E402
ASK = [{"role": "user", "content": "What is the weather in Oslo?"}]
GREEDY = {"temperature": 0, "seed": 7, "num_predict": 60}
OSLO = {"city": "Oslo", "unit": "celsius"}
HISTORY = ASK + [{"role": "assistant", "content": "",
                  "tool_calls": [{"function": {"name": "get_weather", "arguments": OSLO}}]},
                 {"role": "tool", "content": '{"temperature": 3, "sky": "snow"}', "tool_name": "get_weather"}]


def test_tools_are_accepted_and_answered(client):
    r = client.chat(model="smollm2", messages=ASK, tools=[WEATHER], options=GREEDY)
    assert r.done and r.message.role == "assistant" and r.done_reason in ("stop", "length")
    assert r.message.content or r.message.tool_calls
    for call in r.message.tool_calls or ():
        assert call.function.name == "get_weather" and isinstance(call.function.arguments, dict)


def test_a_call_and_its_result_in_the_history_are_answered(client, live):
    r = client.chat(model="smollm2", messages=HISTORY, tools=[WEATHER], options=GREEDY)
    assert r.done and r.message.content
    # the same prompt as the OpenAI shape of this history: the result answered call_1 (no
    # tools: the ollama client's Tool model drops schema keywords such as maxLength)
    from openai import OpenAI

    r = client.chat(model="smollm2", messages=HISTORY, options={"num_predict": 1})

    ours = HISTORY[:1] + [
        {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "get_weather", "arguments": json.dumps(OSLO)}}]},
        {"role": "tool", "content": HISTORY[2]["content"], "tool_call_id": "call_1", "name": "get_weather"}]
    with OpenAI(base_url=live.base, api_key="unused", max_retries=0) as oai:
        o = oai.chat.completions.create(model="smollm2", messages=ours, max_tokens=1)
    assert r.prompt_eval_count == o.usage.prompt_tokens


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "get_weather"}}])
def test_a_forced_call_comes_back_whole_streamed_or_not(live, choice):
    body = {"model": "smollm2", "messages": ASK, "tools": [WEATHER], "tool_choice": choice,
            "options": GREEDY, "stream": False}
    r = httpx.post(live.url + "/api/chat", json=body, timeout=300)
    assert r.status_code == 200, r.text
    whole = ollama.ChatResponse.model_validate(r.json())
    assert whole.done_reason == "stop" and len(whole.message.tool_calls) == 1
    call = whole.message.tool_calls[0]
    assert call.function.name == "get_weather" and isinstance(r.json()["message"]["tool_calls"][0]["function"]
                                                              ["arguments"], dict)
    jsonschema.validate(dict(call.function.arguments), WEATHER["function"]["parameters"])
    with httpx.stream("POST", live.url + "/api/chat", json={**body, "stream": True}, timeout=300) as s:
        parts = [ollama.ChatResponse.model_validate(json.loads(ln)) for ln in s.iter_lines() if ln]
    assert parts[-1].done and parts[-1].done_reason == "stop" and not any(p.done for p in parts[:-1])
    calls = [c for p in parts for c in (p.message.tool_calls or ())]
    assert len(calls) == 1 and calls[0].function.name == "get_weather"
    assert dict(calls[0].function.arguments) == dict(call.function.arguments)
    assert "".join(p.message.content or "" for p in parts) == whole.message.content


def test_bad_tools_and_tool_messages_are_400_naming_the_field(client, live):
    with pytest.raises(ollama.ResponseError) as e:
        client.chat(model="smollm2", messages=ASK, tools=[{"type": "function", "function": {"description": "x"}}])
    assert e.value.status_code == 400 and "tools[0].function.name" in e.value.error
    cases = [({"tools": [WEATHER], "tool_choice": "sometimes"}, "tool_choice"),
             ({"tools": [WEATHER, WEATHER]}, "tools[1].function.name"),
             ({"messages": ASK + [{"role": "tool", "content": "3"}]}, "messages[1]"),
             ({"messages": [{**HISTORY[1], "tool_calls": [{"function": {"name": "f", "arguments": [1]}}]}]},
              "messages[0].tool_calls[0].function.arguments"),
             ({"messages": [{**HISTORY[1], "tool_calls": [{"function": {"name": "bad name!"}}]}]},
              "messages[0].tool_calls[0].function.name")]
    for extra, field in cases:
        r = httpx.post(live.url + "/api/chat", json={"model": "smollm2", "messages": ASK, **extra})
        assert r.status_code == 400 and set(r.json()) == {"error"} and field in r.json()["error"], (extra, r.text)


def test_tool_messages_answer_the_calls_before_them_in_order_or_by_name():
    calls = [{"function": {"name": "a", "arguments": {"x": 1}}}, {"function": {"name": "b", "arguments": {}}}]
    msgs = [Message(role="user", content="hi"), Message(role="assistant", tool_calls=calls),
            Message(role="tool", content="B", tool_name="b"), Message(role="tool", content="A"),
            Message(role="assistant", tool_calls=calls[:1]), Message(role="tool", content="A2")]
    out = ollama_tools.chat_messages(msgs)
    assert [c["id"] for c in out[1]["tool_calls"]] == ["call_1", "call_2"]
    assert out[1]["tool_calls"][0]["function"] == {"name": "a", "arguments": {"x": 1}}  # kept an object
    assert [m.get("tool_call_id") for m in out] == [None, None, "call_2", "call_1", None, "call_3"]


def test_reasoning_becomes_thinking_and_arguments_an_object():
    from edge_infer.chat.events import ToolCall
    from edge_infer.chat.families import family_named
    from edge_infer.chat.reply import Reply, ReplyReader

    msg = ollama_tools.message(Reply(None, "hmm", [ToolCall("f", '{"a": [1]}', "call_x")], "tool_calls"))
    assert msg == {"role": "assistant", "content": "", "thinking": "hmm",
                   "tool_calls": [{"function": {"name": "f", "arguments": {"a": [1]}}}]}
    # Streamed, a call goes out whole once its arguments are, and once.
    out = ollama_wire.ChatWire("m")
    reader = ReplyReader(family_named("hermes"), constrained=True)
    assert ollama_tools.piece(out, reader.token('<tool_call>\n{"name": "f", "arguments": {"a": ')) is None
    line = ollama_tools.piece(out, reader.token("2}"))
    assert line["message"]["tool_calls"] == [{"function": {"name": "f", "arguments": {"a": 2}}}]
    assert ollama_tools.piece(out, reader.token("}\n</tool_call>") + reader.end("stop")) is None
