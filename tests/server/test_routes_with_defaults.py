"""The Anthropic, Responses and Ollama routes as users get them: served with the defaults,
n-gram drafts on. Their own modules serve without drafts to compare greedy texts (a draft's
positions round as one batch and may part at near ties, README); here what can be compared
is: each stream reassembles to its own final reply, every reply is well formed, tool calls
and JSON formats validate, and drafts did run (the prompt repeats a list, as code edits do)."""

from __future__ import annotations

import json

import httpx
import jsonschema
import pytest

from edge_infer.config import EngineSettings

import anthropic
import openai

LIST = "\n".join(f"- item {i}: the value {i * 7}" for i in range(8))
COPY = f"Copy this list exactly, line by line:\n{LIST}"
CITY = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city", "days"]}


@pytest.fixture(scope="module")
def live(make_served):
    assert EngineSettings().draft_max > 0  # the default this module is about
    return make_served()


def drafted(live) -> int:
    return live.engine.snapshot().draft_tokens_total


def test_anthropic_messages_with_drafts(live):
    client = anthropic.Anthropic(base_url=live.url, api_key="x", max_retries=0)
    before = drafted(live)
    body = dict(model="smollm2", max_tokens=120, extra_body={"temperature": 0.0},  # this SDK has no temperature
                messages=[{"role": "user", "content": COPY}])
    whole = client.messages.create(**body)
    assert whole.stop_reason in ("end_turn", "max_tokens") and whole.content[0].text.strip()
    assert 0 < whole.usage.output_tokens <= 120
    with client.messages.stream(**body) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == final.content[0].text and final.usage.output_tokens <= 120
    assert drafted(live) > before  # drafts ran on this route
    tool = {"name": "plan_trip", "description": "Plan a trip", "input_schema": CITY}
    called = client.messages.create(model="smollm2", max_tokens=80, tools=[tool],
                                    tool_choice={"type": "tool", "name": "plan_trip"},
                                    messages=[{"role": "user", "content": "Plan three days in Oslo."}])
    use = [b for b in called.content if b.type == "tool_use"]
    assert called.stop_reason == "tool_use" and len(use) == 1
    jsonschema.validate(use[0].input, CITY)


def test_responses_with_drafts(live):
    client = openai.OpenAI(base_url=live.base, api_key="x", max_retries=0)
    before = drafted(live)
    whole = client.responses.create(model="smollm2", input=COPY, temperature=0, max_output_tokens=120)
    assert whole.status in ("completed", "incomplete") and whole.output_text.strip()
    events = list(client.responses.create(model="smollm2", input=COPY, temperature=0, max_output_tokens=120,
                                          stream=True))
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    final = events[-1].response  # response.completed, or response.incomplete when cut at the cap
    assert events[-1].type in ("response.completed", "response.incomplete")
    assert "".join(deltas) == final.output_text and final.usage.output_tokens <= 120
    assert drafted(live) > before
    tool = {"type": "function", "name": "plan_trip", "description": "Plan a trip", "parameters": CITY}
    called = client.responses.create(model="smollm2", input="Plan three days in Oslo.", tools=[tool],
                                     tool_choice="required", max_output_tokens=80)
    calls = [item for item in called.output if item.type == "function_call"]
    assert calls and calls[0].name == "plan_trip"
    jsonschema.validate(json.loads(calls[0].arguments), CITY)


def test_ollama_chat_and_format_with_drafts(live):
    before = drafted(live)
    body = {"model": "smollm2", "messages": [{"role": "user", "content": COPY}],
            "options": {"temperature": 0, "num_predict": 120}}
    whole = httpx.post(live.url + "/api/chat", json=body | {"stream": False}, timeout=120).json()
    assert whole["done"] and whole["message"]["content"].strip() and 0 < whole["eval_count"] <= 120
    with httpx.stream("POST", live.url + "/api/chat", json=body | {"stream": True}, timeout=120) as r:
        lines = [json.loads(line) for line in r.iter_lines() if line.strip()]
    assert lines[-1]["done"] and not any(line["done"] for line in lines[:-1])
    assert "".join(line["message"]["content"] for line in lines).strip()
    assert drafted(live) > before
    shaped = httpx.post(live.url + "/api/chat", timeout=120, json={
        "model": "smollm2", "stream": False, "format": CITY, "options": {"num_predict": 80},
        "messages": [{"role": "user", "content": "Plan three days in Oslo, as JSON."}]}).json()
    if shaped["done_reason"] == "stop":  # a reply cut at num_predict is not whole JSON
        jsonschema.validate(json.loads(shaped["message"]["content"]), CITY)
