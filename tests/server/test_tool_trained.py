"""Tool calls from a tool-trained model: Qwen2.5-Coder-1.5B-Instruct (catalog `qwen-coder`)
through its own chat template (which reads `tools`), the real server and the official
openai client. Under `auto` the model decides to call by itself; the call comes back as
tool_calls, its result goes back as a `tool` message, and the model answers from it.
(This model makes one call per turn, also when asked for two cities and allowed parallel
calls: parallel calls are tested on SmolLM2 in test_tool_calls.py.)"""

from __future__ import annotations

import json

import httpx
import jsonschema
import pytest
from openai import OpenAI

from edge_infer.engine import tool_family
from tests.server.conftest import start_server
from tests.server.test_tool_calls import reassemble

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "minLength": 1, "maxLength": 40},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city"], "additionalProperties": False}}}
ASK = [{"role": "user", "content": "What is the weather in Oslo right now?"}]


@pytest.fixture(scope="module")
def qwen(qwen_coder_path):
    from edge_infer.config import EngineSettings
    from edge_infer.engine import Engine

    engine = Engine(qwen_coder_path, EngineSettings(ctx=2048, parallel=2, n_threads=2), name="qwen-coder")
    bg, live = start_server(engine)
    with OpenAI(base_url=live.base, api_key="unused", max_retries=0, timeout=300) as client:
        yield live, client
    bg.stop()
    engine.close()


def test_its_template_reads_tools_and_its_family_is_hermes(qwen):
    live, _ = qwen
    assert live.engine.template.supports_tools
    assert tool_family(live.engine).name == "hermes"


def test_under_auto_it_calls_by_itself_and_answers_from_the_result(qwen):
    _, client = qwen
    first = client.chat.completions.create(model="qwen-coder", messages=ASK, tools=[WEATHER],
                                           max_tokens=80, temperature=0)
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls", choice.message
    call = choice.message.tool_calls[0]
    assert call.function.name == "get_weather" and call.id.startswith("call_")
    args = json.loads(call.function.arguments)
    jsonschema.validate(args, WEATHER["function"]["parameters"])
    assert args["city"] == "Oslo"
    history = ASK + [{"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
                     {"role": "tool", "tool_call_id": call.id,
                      "content": json.dumps({"temperature_celsius": -7, "sky": "snow"})}]
    # tool_choice "none": the answer from the result. (Offered the tools again, this 1.5B model
    # repeats its call as text, copying the `{{"name": ...}}` its own template shows it.)
    final = client.chat.completions.create(model="qwen-coder", messages=history, tools=[WEATHER],
                                           tool_choice="none", max_tokens=60, temperature=0).choices[0]
    assert final.finish_reason == "stop" and not final.message.tool_calls
    assert "-7" in final.message.content and "snow" in final.message.content, final.message.content


def test_streamed_auto_reply_reassembles_to_the_whole_one(qwen):
    _, client = qwen
    body = dict(model="qwen-coder", messages=ASK, tools=[WEATHER], max_tokens=80, temperature=0)
    whole = client.chat.completions.create(**body).choices[0]
    content, calls, _, reason = reassemble(client.chat.completions.create(**body, stream=True))
    assert (content, reason) == (whole.message.content or "", whole.finish_reason)
    assert [(c["name"], c["arguments"]) for c in calls] == [
        (c.function.name, c.function.arguments) for c in whole.message.tool_calls]


def test_a_forced_call_validates_and_streams_its_arguments(qwen):
    _, client = qwen
    for seed in range(3):
        out = client.chat.completions.create(model="qwen-coder", messages=ASK, tools=[WEATHER],
                                             tool_choice="required", max_tokens=60, temperature=0.7, seed=seed)
        call = out.choices[0].message.tool_calls[0]
        jsonschema.validate(json.loads(call.function.arguments), WEATHER["function"]["parameters"])
    chunks = list(client.chat.completions.create(model="qwen-coder", messages=ASK, tools=[WEATHER],
                                                 tool_choice="required", max_tokens=60, temperature=0,
                                                 stream=True, parallel_tool_calls=False))
    pieces = [tc for ch in chunks for c in ch.choices for tc in (c.delta.tool_calls or ())]
    fragments = [p.function.arguments for p in pieces[1:] if p.function and p.function.arguments]
    assert pieces[0].function.name == "get_weather" and len(fragments) >= 3
    assert json.loads("".join(fragments))["city"] == "Oslo"


PREFIX = "def is_even(n: int) -> bool:\n    \"\"\"True when n is even.\"\"\"\n"
SUFFIX = "\n    return result\n"


def test_infill_fills_a_function_body_that_parses(qwen):
    """llama-server's /infill, in qwen-coder's own FIM tokens: the middle between a signature
    and its return makes a function Python parses."""
    import ast

    live, _ = qwen
    # No drafts: after the return line end-of-text and "```" are 0.06 apart (log-probabilities),
    # and a draft's positions, evaluated in one batch, round differently from one at a time; a
    # fresh CI run's first reply went on past the return line that way. The test is about the
    # FIM prompt and /infill's wire format; speculation's own output is tested in the engine.
    body_of_request = {
        "input_prefix": PREFIX, "input_suffix": SUFFIX, "n_predict": 48, "temperature": 0, "speculative": False,
        "input_extra": [{"filename": "util.py", "text": "def is_odd(n):\n    return n % 2 == 1\n"}]}
    r = httpx.post(live.url + "/infill", timeout=300, json=body_of_request)
    body = r.json()
    len_prompt = body["tokens_evaluated"]
    assert r.status_code == 200 and body["stop"] is True and body["tokens_predicted"] > 0, body
    middle = body["content"]
    print(f"infill middle: {middle!r}")
    ast.parse(PREFIX + middle + SUFFIX)
    assert "result" in middle and "%" in middle
    # Streamed: the middle in pieces, then the closing object, and the same text as the whole
    # reply to the same request in the same state. (Not the first run's text: a rerun reuses
    # 51 cached tokens and evaluates the last one alone, and llama.cpp's one-token decode and
    # its batched prompt evaluation round differently, by ~0.1 in a log-probability here; where
    # end-of-text and "```" are 0.06 apart after the return, that tips a greedy reply.)
    with httpx.stream("POST", live.url + "/infill", timeout=300, json={**body_of_request, "stream": True}) as s:
        chunks = [json.loads(line[len("data: "):]) for line in s.iter_lines() if line.startswith("data: ")]
    text = "".join(c["content"] for c in chunks)
    print(f"infill streamed: {text!r} ({chunks[-1]['tokens_predicted']} tokens, {chunks[-1]['tokens_cached']} cached)")
    assert chunks[-1]["stop"] is True and all(c["stop"] is False for c in chunks[:-1]) and len(chunks) > 2
    again = httpx.post(live.url + "/infill", timeout=300, json=body_of_request).json()
    assert text == again["content"] and chunks[-1]["tokens_cached"] == again["tokens_cached"] == len_prompt - 1


def test_suffix_on_completions_and_ollama_generate(qwen):
    live, client = qwen
    c = client.completions.create(model="qwen-coder", prompt=PREFIX, suffix=SUFFIX, max_tokens=48, temperature=0)
    import ast

    ast.parse(PREFIX + c.choices[0].text + SUFFIX)
    r = httpx.post(live.url + "/api/generate", timeout=300, json={
        "model": "qwen-coder", "prompt": PREFIX, "suffix": SUFFIX, "stream": False,
        "options": {"temperature": 0, "num_predict": 48}})
    assert r.status_code == 200 and r.json()["done"]
    ast.parse(PREFIX + r.json()["response"] + SUFFIX)
