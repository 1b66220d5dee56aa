"""Every tool-call family through the real server, the official openai client and the real
SmolLM2, each served with a chat template of that family (--chat-template-file): the
family is picked from the template, a forced call is written in the family's own syntax
under the schema's grammar and comes back as validated tool_calls; JSON families stream a
call's arguments in fragments as they are written; a call cut by max_tokens streams and
answers the same (finish_reason "length"). SmolLM2 is not trained on these syntaxes: the
grammar writes the syntax, the model chooses the values."""

from __future__ import annotations

import json

import jsonschema
import pytest
from openai import OpenAI

from edge_infer.engine import tool_family
from tests.server.test_tool_calls import reassemble

NOTES = {
    "hermes": 'Write each call as <tool_call>{"name": ..., "arguments": ...}</tool_call>.',
    "mistral": 'Write calls as [TOOL_CALLS][{"name": ..., "arguments": ...}].',
    "llama3": 'Write a call as {"name": ..., "parameters": ...}, or python after <|python_tag|>.',
    "function_gemma": "Write calls as <start_function_call>call:NAME{key:<escape>text<escape>}<end_function_call>.",
    "gemma": "Write calls in a ```tool_code block: print(NAME(key=value)).",
}


def chatml_template(note: str, generation: str = "") -> str:
    """ChatML (SmolLM2's own format) that reads `tools` and tells the model a family's syntax."""
    return (
        "{% if tools %}<|im_start|>system\nYou can call these functions. " + note.replace("{", "{{ '{' }}") +
        "\n{% for t in tools %}{{ t | tojson }}\n{% endfor %}<|im_end|>\n{% endif %}"
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}{% for c in m.tool_calls or [] %}"
        "{{ c.function.name }} {{ c.function.arguments | tojson }}{% endfor %}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n" + generation + "{% endif %}")


BOOK = {"type": "function", "function": {"name": "book_hotel", "description": "Book a hotel room", "parameters": {
    "type": "object", "properties": {
        "city": {"type": "string", "minLength": 2, "maxLength": 20},
        "nights": {"type": "integer"},
        "room": {"enum": ["single", "double", "suite"]},
        "guests": {"type": "array", "items": {"type": "string", "maxLength": 16}, "minItems": 1, "maxItems": 2}},
    "required": ["city", "nights", "room", "guests"], "additionalProperties": False}}}
ASK = [{"role": "user", "content": "Book two nights in a double room in Oslo for Ada."}]


@pytest.fixture(scope="module")
def family_server(make_served, tmp_path_factory):
    """family -> a client of a server whose SmolLM2 speaks that family's template."""
    servers = {}

    def get(family: str, generation: str = "", note: str | None = None):
        key = (family, generation)
        if key not in servers:
            path = tmp_path_factory.mktemp("templates") / f"{family}.jinja"
            path.write_text(chatml_template(NOTES.get(family, "") if note is None else note, generation))
            live = make_served(chat_template=str(path), parallel=2)
            servers[key] = (live, OpenAI(base_url=live.base, api_key="unused", max_retries=0))
        return servers[key]

    yield get
    for _, client in servers.values():
        client.close()


@pytest.mark.parametrize("family", sorted(NOTES))
def test_a_forced_call_comes_back_in_each_family(family_server, family):
    live, client = family_server(family)
    assert tool_family(live.engine).name == family  # chosen from the template
    assert tool_family(live.engine, forced=True).name == family  # written in it
    for seed in range(3):
        body = dict(model="smollm2", messages=ASK, tools=[BOOK], tool_choice="required", max_tokens=160,
                    temperature=0.8, seed=seed, parallel_tool_calls=False)
        whole = client.chat.completions.create(**body).choices[0]
        assert whole.finish_reason == "tool_calls" and len(whole.message.tool_calls) == 1, whole
        call = whole.message.tool_calls[0]
        assert call.function.name == "book_hotel" and not whole.message.content
        jsonschema.validate(json.loads(call.function.arguments), BOOK["function"]["parameters"])
    # streamed == whole, greedy and without drafts: a sampled reply may differ with the KV prefix
    # reused, and a draft's positions round as one batch, so two greedy runs with drafts part where
    # two tokens nearly tie, as SmolLM2's do inside these junk strings (a full CI run's did).
    body.update(temperature=0, seed=None, extra_body={"speculative": False})
    call = client.chat.completions.create(**body).choices[0].message.tool_calls[0]
    content, calls, _, reason = reassemble(client.chat.completions.create(**body, stream=True))
    assert (content, reason) == ("", "tool_calls")
    assert [(c["name"], c["arguments"]) for c in calls] == [("book_hotel", call.function.arguments)]


@pytest.mark.parametrize("family", ["hermes", "mistral", "llama3"])
def test_json_families_stream_arguments_as_they_are_written(family_server, family):
    live, client = family_server(family)
    chunks = list(client.chat.completions.create(
        model="smollm2", messages=ASK, tools=[BOOK], tool_choice="required", max_tokens=160,
        temperature=0, stream=True, parallel_tool_calls=False))
    pieces = [tc for ch in chunks for c in ch.choices for tc in (c.delta.tool_calls or ())]
    assert {p.index for p in pieces} == {0}
    assert pieces[0].id and pieces[0].function.name == "book_hotel"      # the name first, once
    fragments = [p.function.arguments for p in pieces[1:] if p.function and p.function.arguments]
    assert len(fragments) >= 8, fragments                                   # many, as tokens come
    assert all(p.id is None and not (p.function and p.function.name) for p in pieces[1:])
    jsonschema.validate(json.loads("".join(fragments)), BOOK["function"]["parameters"])


def test_a_forced_call_cut_by_max_tokens_streams_and_answers_the_same(family_server):
    _, client = family_server("hermes")
    body = dict(model="smollm2", messages=ASK, tools=[BOOK], tool_choice="required", max_tokens=28,
                temperature=0, extra_body={"speculative": False})  # repeatable greedy (see above)
    whole = client.chat.completions.create(**body).choices[0]
    assert whole.finish_reason == "length"
    args = whole.message.tool_calls[0].function.arguments
    assert args.startswith("{") and not args.rstrip().endswith("}")  # cut: OpenAI sends it as it is
    content, calls, _, reason = reassemble(client.chat.completions.create(**body, stream=True))
    assert (content, reason) == ("", "length")
    assert [(c["name"], c["arguments"]) for c in calls] == [("book_hotel", args)]


def test_a_template_that_opens_think_makes_the_reply_start_in_reasoning(family_server):
    """A DeepSeek-R1-style template writes <think> into the prompt: the reply is reasoning
    up to </think>, then content (the model forced by a grammar: parsing on known text)."""
    _, client = family_server("deepseek", generation="<think>\n", note="")
    text = "The user greets me.</think>Hello there!"
    body = dict(model="smollm2", messages=[{"role": "user", "content": "Hi"}], max_tokens=40, temperature=0,
                extra_body={"grammar": "root ::= " + json.dumps(text)})
    whole = client.chat.completions.create(**body).choices[0].message
    assert (whole.content, whole.model_extra["reasoning_content"]) == ("Hello there!", "The user greets me.")
    content, _, reasoning, _ = reassemble(client.chat.completions.create(**body, stream=True))
    assert (content, reasoning) == ("Hello there!", "The user greets me.")


# A Qwen 3 style switch: enable_thinking false writes an empty think block into the prompt.
THINKING_SWITCH = "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n{% endif %}"


def test_reasoning_effort_none_turns_thinking_off_where_the_template_has_a_switch(family_server):
    _, client = family_server("qwen3", generation=THINKING_SWITCH, note="")

    def prompt_tokens(**extra):
        out = client.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": "Hi"}],
                                             max_tokens=1, temperature=0, **extra)
        return out.usage.prompt_tokens

    default = prompt_tokens()
    off = prompt_tokens(reasoning_effort="none")
    assert off > default                                     # the empty think block is in the prompt
    assert prompt_tokens(extra_body={"chat_template_kwargs": {"enable_thinking": False}}) == off
    assert prompt_tokens(reasoning_effort="high") == default
    # explicit kwargs win over what reasoning_effort implies
    assert prompt_tokens(reasoning_effort="none",
                         extra_body={"chat_template_kwargs": {"enable_thinking": True}}) == default


@pytest.mark.parametrize("extra, param", [
    ({"reasoning_effort": "max"}, "reasoning_effort"),
    ({"chat_template_kwargs": {"messages": []}}, "chat_template_kwargs"),
    ({"chat_template_kwargs": {"not a name": 1}}, "chat_template_kwargs"),
    ({"chat_template_kwargs": ["enable_thinking"]}, "chat_template_kwargs"),
])
def test_bad_reasoning_controls_are_400_naming_the_field(family_server, extra, param):
    import httpx

    from tests.server.test_errors import error_of

    live, _ = family_server("qwen3", generation=THINKING_SWITCH, note="")
    r = httpx.post(live.base + "/chat/completions", json={
        "model": "smollm2", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1, **extra})
    assert r.status_code == 400 and error_of(r)["param"] == param, r.text


def test_a_template_variable_of_the_wrong_type_is_a_400_and_the_server_goes_on(family_server):
    import httpx

    live, client = family_server("typed", generation="{{ 'x' * (repeat + 1) if repeat is defined else '' }}",
                                 note="")
    r = httpx.post(live.base + "/chat/completions", json={
        "model": "smollm2", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1,
        "chat_template_kwargs": {"repeat": "many"}})
    assert r.status_code == 400 and "chat template failed" in r.json()["error"]["message"], r.text
    ok = client.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": "Hi"}],
                                        max_tokens=1, extra_body={"chat_template_kwargs": {"repeat": 2}})
    assert ok.choices[0].finish_reason == "length"


def test_ollama_think_false_turns_thinking_off_as_reasoning_effort_none_does(family_server):
    import httpx

    live, _ = family_server("qwen3", generation=THINKING_SWITCH, note="")

    def prompt_eval_count(**extra):
        r = httpx.post(live.url + "/api/chat", timeout=60, json={
            "model": "smollm2", "messages": [{"role": "user", "content": "Hi"}], "stream": False,
            "options": {"num_predict": 1, "temperature": 0}, **extra})
        assert r.status_code == 200, r.text
        return r.json()["prompt_eval_count"]

    default = prompt_eval_count()
    assert prompt_eval_count(think=False) > default   # the empty think block is in the prompt
    assert prompt_eval_count(think=True) == default
