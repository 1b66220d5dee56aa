"""Structured output over HTTP with the defaults users get (drafts on): issue 48's repro
(SmolLM2, temperature 0, "Name a city in Norway.", a strict name/country schema) comes back
as JSON that validates and ends by itself; an integer bounded 0..9 stays in range; a schema
with no grammar is a 400 that says where; Ollama's `format` schema takes the same path."""

from __future__ import annotations

import json

import httpx
import jsonschema
import openai
import pytest

CITY = {"type": "object", "properties": {"name": {"type": "string"}, "country": {"type": "string"}},
        "required": ["name", "country"]}
DIGIT = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 9}}, "required": ["n"]}


def strict(name: str, schema: dict) -> dict:
    return {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": schema}}


def test_the_issue_repro_is_json_that_validates_and_stops(client):
    choice = client.chat.completions.create(
        model="smollm2", temperature=0, max_tokens=200, response_format=strict("city", CITY),
        messages=[{"role": "user", "content": "Name a city in Norway."}]).choices[0]
    print(f"\nrepro reply: {choice.message.content!r} ({choice.finish_reason})")
    jsonschema.validate(json.loads(choice.message.content), CITY)
    assert choice.finish_reason == "stop"


@pytest.mark.parametrize("temperature", [0, 1])
def test_an_integer_bounded_0_to_9_stays_in_range(client, temperature):
    for seed in range(3):
        choice = client.chat.completions.create(
            model="smollm2", temperature=temperature, seed=seed, max_tokens=40, response_format=strict("n", DIGIT),
            messages=[{"role": "user", "content": "Pick a number and answer as JSON."}]).choices[0]
        assert choice.finish_reason == "stop", choice.message.content
        assert json.loads(choice.message.content)["n"] in range(10)


def test_a_schema_without_a_grammar_is_a_400_saying_where(client):
    bad = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 10, "maximum": 2}}}
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(model="smollm2", max_tokens=8, response_format=strict("n", bad),
                                       messages=[{"role": "user", "content": "Hi"}])
    body = err.value.body
    assert body["param"] == "response_format.json_schema.schema"
    assert "#/properties/n: no integer is within its minimum and maximum" in body["message"]


def test_ollama_format_schema_is_json_that_validates(served):
    r = httpx.post(served.url + "/api/chat", timeout=60, json={
        "model": "smollm2", "stream": False, "format": DIGIT, "options": {"temperature": 1, "seed": 4},
        "messages": [{"role": "user", "content": "Pick a number and answer as JSON."}]})
    assert r.status_code == 200, r.text
    content = r.json()["message"]["content"]
    assert json.loads(content)["n"] in range(10) and r.json()["done_reason"] == "stop"
