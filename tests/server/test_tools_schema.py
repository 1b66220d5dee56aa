"""Function calling, the request side: tools, tool_choice, tool calls and tool messages
are accepted in OpenAI's shape, and every mistake is a 400 naming its field."""

import json

import pytest

from edge_infer.server.errors import APIError
from edge_infer.server.jobs import chat_message, grammar_for
from edge_infer.server.schemas import ChatCompletionRequest, parse

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                    "unit": {"enum": ["c", "f"]}},
                   "required": ["city"]}, "strict": True}}
TIME = {"type": "function", "function": {"name": "get-time"}}
USER = {"role": "user", "content": "Weather in Paris?"}
CALL = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]}
RESULT = {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 21}'}


def body(**fields):
    return {"messages": [USER], **fields}


def ok(data) -> ChatCompletionRequest:
    return parse(ChatCompletionRequest, json.dumps(data).encode())


def refused(data) -> APIError:
    with pytest.raises(APIError) as info:
        ok(data)
    assert info.value.status == 400
    return info.value


@pytest.mark.parametrize("data", [
    body(tools=[WEATHER]),
    body(tools=[WEATHER, TIME], tool_choice="auto"),
    body(tools=[WEATHER], tool_choice="none"),
    body(tools=[WEATHER], tool_choice="required", parallel_tool_calls=False),
    body(tools=[WEATHER, TIME], tool_choice={"type": "function", "function": {"name": "get-time"}}),
    body(tool_choice="auto"),  # auto and none need no tools
    body(tools=[]),
    {"messages": [USER, CALL, RESULT], "tools": [WEATHER]},
    {"messages": [USER, CALL, RESULT]},  # history with calls, no tools offered now
    {"messages": [USER, {**CALL, "content": "Let me look.", "tool_calls": [
        {**CALL["tool_calls"][0], "function": {"name": "get_weather", "arguments": ""}}]}]},
])
def test_valid_bodies_are_accepted(data):
    ok(data)


def test_fields_reach_the_engine_shape():
    req = ok({"messages": [USER, CALL, RESULT], "tools": [WEATHER, TIME], "tool_choice": "required"})
    assert req.forced_tool == "required" and req.parallel_tool_calls is True
    assert req.tools_for_prompt == [
        {"type": "function", "function": {k: WEATHER["function"][k] for k in ("name", "description", "parameters")}},
        {"type": "function", "function": {"name": "get-time", "parameters": {"type": "object", "properties": {}}}}]
    read = [{**c, "function": {"name": "get_weather", "arguments": {"city": "Paris"}}} for c in CALL["tool_calls"]]
    assert [chat_message(m) for m in req.messages] == [  # arguments read once, at the door
        USER, {"role": "assistant", "content": "", "tool_calls": read}, RESULT]
    assert ok(body(tools=[WEATHER], tool_choice="none")).tools_for_prompt is None
    assert ok(body(tools=[WEATHER])).forced_tool is None
    named = ok(body(tools=[WEATHER, TIME], tool_choice={"type": "function", "function": {"name": "get_weather"}}))
    assert named.forced_tool == "get_weather"
    grammar, param = grammar_for(named)
    assert param == "tool_choice" and '\\"get_weather\\"' in grammar and "get-time" not in grammar


@pytest.mark.parametrize("data, param", [
    (body(tools=[{"type": "function", "function": {"description": "no name"}}]), "tools[0].function.name"),
    (body(tools=[{"type": "function", "function": {"name": "has space"}}]), "tools[0].function.name"),
    (body(tools=[{"type": "function", "function": {"name": "x" * 65}}]), "tools[0].function.name"),
    (body(tools=[{"type": "function", "function": {"name": ""}}]), "tools[0].function.name"),
    (body(tools=[WEATHER, TIME, WEATHER]), "tools[2].function.name"),
    (body(tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "objekt"}}}]),
     "tools[0].function.parameters"),
    (body(tools=[{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"minLength": -1}}}}}]), "tools[0].function.parameters"),
    (body(tools=[{"type": "function", "function": {"name": "f", "parameters": "{}"}}]),
     "tools[0].function.parameters"),
    (body(tools=[{"type": "retrieval"}]), "tools[0].type"),
    (body(tools=[WEATHER], tool_choice={"type": "function", "function": {"name": "nope"}}),
     "tool_choice.function.name"),
    (body(tools=[WEATHER], tool_choice={"type": "function", "function": {}}), "tool_choice.function.name"),
    (body(tool_choice="required"), "tool_choice"),
    (body(tools=[], tool_choice="required"), "tool_choice"),
    (body(tool_choice={"type": "function", "function": {"name": "get_weather"}}), "tool_choice"),
    (body(tools=[WEATHER], tool_choice="any"), "tool_choice"),
    (body(tools=[WEATHER], tool_choice={"type": "allowed_tools", "tools": []}), "tool_choice"),
    (body(tools=[WEATHER], tool_choice=3), "tool_choice"),
    ({"messages": [USER, RESULT]}, "messages[1].tool_call_id"),
    ({"messages": [USER, CALL, {**RESULT, "tool_call_id": "call_2"}]}, "messages[2].tool_call_id"),
    ({"messages": [USER, CALL, {"role": "tool", "content": "21"}]}, "messages[2].tool_call_id"),
    ({"messages": [USER, {**RESULT, "tool_call_id": "call_1"}, CALL]}, "messages[1].tool_call_id"),  # answers a later call
    ({"messages": [USER, {**CALL, "tool_calls": [{**CALL["tool_calls"][0], "function": {
        "name": "get_weather", "arguments": "{city: Paris}"}}]}]}, "messages[1].tool_calls[0].function.arguments"),
    ({"messages": [USER, {**CALL, "tool_calls": [{**CALL["tool_calls"][0], "function": {
        "name": "get_weather", "arguments": "[1, 2]"}}]}]}, "messages[1].tool_calls[0].function.arguments"),
    ({"messages": [USER, {**CALL, "tool_calls": [{"id": "c", "type": "function", "function": {
        "name": "bad name", "arguments": "{}"}}]}]}, "messages[1].tool_calls[0].function.name"),
    ({"messages": [{**USER, "tool_calls": CALL["tool_calls"]}]}, "messages[0].tool_calls"),
    (body(functions=[{"name": "f"}]), "functions"),
    (body(function_call="auto"), "function_call"),
])
def test_mistakes_are_400_naming_the_field(data, param):
    err = refused(data)
    assert err.param == param, err.message


def test_forced_call_cannot_be_combined_with_another_grammar():
    for extra in ({"response_format": {"type": "json_object"}}, {"grammar": 'root ::= "a"'}):
        req = ok(body(tools=[WEATHER], tool_choice="required", **extra))
        with pytest.raises(APIError) as info:
            grammar_for(req)
        assert info.value.param == "tool_choice"


def test_a_schema_the_converter_cannot_map_is_400_on_its_parameters():
    req = ok(body(tools=[TIME, {"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"$ref": "https://example.com/schema.json"}}}}}],
        tool_choice="required"))
    with pytest.raises(APIError) as info:
        grammar_for(req)
    assert info.value.param == "tools[1].function.parameters"
