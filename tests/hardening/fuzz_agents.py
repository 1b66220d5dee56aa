"""Fuzz cases for the routes agents and editors speak: Anthropic's /v1/messages (and
count_tokens), OpenAI's /v1/responses, /infill and the token utilities. Each case starts
from a valid body of its route and breaks one to three fields (wrong types, junk, huge
values, unknown block and item types), or breaks the body itself; some stay valid."""

from __future__ import annotations

import random

from .fuzz_cases import Raw, dumps, huge_string, junk

ASK = [{"role": "user", "content": "hi"}]
TOOL_A = {"name": "get_weather", "description": "d", "input_schema": {"type": "object",
          "properties": {"city": {"type": "string"}}}}
TOOL_R = {"type": "function", "name": "get_weather", "parameters": {"type": "object",
          "properties": {"city": {"type": "string"}}}}

# route -> (a valid body, the fields worth breaking)
ROUTES = {
    "/v1/messages": ({"model": "smollm2", "max_tokens": 4, "messages": ASK},
                     ["model", "max_tokens", "messages", "system", "stop_sequences", "temperature", "top_p",
                      "top_k", "stream", "tools", "tool_choice", "thinking", "metadata"]),
    "/v1/messages/count_tokens": ({"model": "smollm2", "messages": ASK},
                                  ["model", "messages", "system", "tools", "tool_choice"]),
    "/v1/responses": ({"model": "smollm2", "input": "hi", "max_output_tokens": 4},
                      ["model", "input", "instructions", "tools", "tool_choice", "max_output_tokens", "temperature",
                       "top_p", "reasoning", "text", "stream", "store", "previous_response_id",
                       "parallel_tool_calls"]),
    "/infill": ({"input_prefix": "def f(", "input_suffix": ")\n", "n_predict": 4},
                ["input_prefix", "input_suffix", "input_extra", "prompt", "n_predict", "temperature", "stop",
                 "stream", "model"]),
    "/tokenize": ({"content": "hi"}, ["content", "add_special", "parse_special", "with_pieces", "model"]),
    "/detokenize": ({"tokens": [1, 2]}, ["tokens", "model"]),
    "/apply-template": ({"messages": ASK}, ["messages", "tools", "model"]),
}

# Shapes a careless parser trips on: blocks and items of each kind with parts missing.
BLOCKS = [{"type": "text"}, {"type": "text", "text": 5}, {"type": "tool_use"}, {"type": "tool_use", "id": "x",
          "name": "f", "input": "not an object"}, {"type": "tool_result"}, {"type": "tool_result",
          "tool_use_id": "x", "content": [{"type": "image"}]}, {"type": "image", "source": {}}, {"type": "thinking"},
          {"type": "nope"}, {}, "text", None]
ITEMS = [{"type": "message"}, {"type": "message", "role": "tool", "content": "x"}, {"role": "user",
         "content": [{"type": "input_image"}]}, {"type": "function_call"}, {"type": "function_call", "call_id": "c",
         "name": "f", "arguments": {"a": 1}}, {"type": "function_call_output"}, {"type": "function_call_output",
         "call_id": "c", "output": [{"type": "nope"}]}, {"type": "reasoning"}, {"type": "item_reference", "id": "x"},
         {}, "x", 5]


def _special(route: str, name: str, rng: random.Random):
    """A field value of the right outer shape with something wrong inside (None: use junk)."""
    if route.startswith("/v1/messages") and name == "messages":
        role = rng.choice(["user", "assistant", "system", "tool", ""])
        return [{"role": role, "content": [rng.choice(BLOCKS) for _ in range(rng.randint(1, 3))]}]
    if route == "/v1/responses" and name == "input":
        return [rng.choice(ITEMS) for _ in range(rng.randint(1, 3))]
    if name == "tools":
        tool = dict(rng.choice([TOOL_A, TOOL_R]))
        tool[rng.choice(list(tool))] = junk(rng)
        return [tool]
    if name == "tool_choice":
        return rng.choice([{"type": "tool"}, {"type": "any"}, {"type": "function"}, {"type": "tool", "name": "zz"},
                           "required", "bogus", {"type": "function", "name": 5}])
    if name == "tokens":
        return rng.choice([[-1], [2**31], [1] * rng.randint(1, 5000), ["a"], [Raw("1e999")], [1.5]])
    if name == "previous_response_id":
        return rng.choice(["resp_nope", "", "../../etc", "x" * 5000])
    return None


def gen_agent_route(rng: random.Random) -> dict:
    route = rng.choice(list(ROUTES))
    valid, fields = ROUTES[route]
    body = dict(valid)
    roll = rng.random()
    if roll < 0.08:
        text = dumps(body)
        cut = rng.randint(0, max(0, len(text) - 1))
        return dict(path=route, body=text[:cut], desc=f"{route} cut at {cut}", expect="4xx")
    if roll < 0.12:
        return dict(path=route, body=dumps(rng.choice([[], "x", 5, None])), desc=f"{route} non-object", expect="4xx")
    if roll < 0.22:  # valid, with a bit of variety
        if "stream" in fields and rng.random() < 0.5:
            body["stream"] = True
        # /infill is valid only on a model with FIM tokens: its answer is judged, not expected
        return dict(path=route, body=dumps(body), desc=f"{route} valid", expect=None if route == "/infill" else "2xx")
    changed = []
    for _ in range(rng.randint(1, 3)):
        name = rng.choice(fields)
        value = _special(route, name, rng)
        if value is None:
            value = huge_string(rng) if rng.random() < 0.05 else junk(rng)
        limit = name in ("max_tokens", "max_output_tokens", "n_predict")
        if limit and (value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)
                                        and value > 64)):
            value = rng.choice([0, -1, 0.5])  # no limit, or a huge one, is valid and only runs long
        body[name] = value
        changed.append(name)
    return dict(path=route, body=dumps(body), desc=f"{route} broken {','.join(changed)}")
