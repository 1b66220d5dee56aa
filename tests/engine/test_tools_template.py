"""Tools in the prompt: through the model's own chat template when it reads `tools`, else
the Hermes-style description injected into the system prompt (SmolLM2's template has no
tool support); and forced tool calls under tool_call_grammar on the real SmolLM2."""

import json
import re

import jsonschema
import pytest

from edge_infer.engine import Request, SamplingParams
from edge_infer.chat import HERMES, CallWrapper, tool_call_grammar, validate_gbnf
from edge_infer.chat.template import ChatTemplate
from edge_infer.chat.gbnf.tools import MISTRAL, prefixed
from edge_infer.chat.tool_prompt import template_supports_tools

WEATHER_SCHEMA = {"type": "object", "properties": {
    "city": {"type": "string", "maxLength": 24}, "unit": {"enum": ["celsius", "fahrenheit"]},
    "days": {"type": "integer", "minimum": 1, "maximum": 7}}, "required": ["city", "unit"]}
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather forecast of a city",
                                            "parameters": WEATHER_SCHEMA}}
SEARCH = {"type": "function", "function": {"name": "web-search", "description": "Search the web", "parameters": {
    "type": "object", "properties": {"query": {"type": "string", "maxLength": 40}}, "required": ["query"]}}}
TOOLS = [WEATHER, SEARCH]
HISTORY = [
    {"role": "user", "content": "What is the weather in Oslo?"},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "call_7", "type": "function", "function": {
        "name": "get_weather", "arguments": '{"city": "Oslo", "unit": "celsius"}'}}]},
    {"role": "tool", "tool_call_id": "call_7", "content": '{"temperature": -3}'},
    {"role": "user", "content": "And in Bergen?"},
]
# A Hermes / Qwen 2.5 style template that renders tools itself (trimmed to what is tested).
TOOL_TEMPLATE = (
    "{% if tools %}<|im_start|>system\n<tools>{% for t in tools %}{{ '\\n' }}{{ t | tojson }}{% endfor %}\n</tools><|im_end|>\n"
    "{% endif %}{% for m in messages %}{% if m.role == 'tool' %}<|im_start|>user\n<tool_response>\n"
    "{{ m.content }}\n</tool_response><|im_end|>\n{% else %}<|im_start|>{{ m.role }}\n{{ m.content }}"
    "{% for c in m.tool_calls or [] %}<tool_call>\n{\"name\": \"{{ c.function.name }}\", \"arguments\": "
    "{{ c.function.arguments | tojson }}}\n</tool_call>{% endfor %}<|im_end|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def test_template_supports_tools():
    assert template_supports_tools(TOOL_TEMPLATE)
    assert not template_supports_tools("{% for m in messages %}{{ m.content }}{% endfor %}")
    assert not template_supports_tools("{% set tools_x = 1 %}{{ messages }}")  # a word that merely starts so


def test_smollm2_without_tool_support_gets_the_hermes_system_prompt(make_engine):
    engine = make_engine(ctx=512)
    template = engine.prompts.template
    assert not template.supports_tools  # SmolLM2's template never reads `tools`
    text = template.render(HISTORY, tools=TOOLS)
    system = text.split("<|im_end|>")[0]
    assert system.startswith("<|im_start|>system\n# Tools") and "<tools>" in system
    for tool in TOOLS:  # each tool, schema included, as one JSON line
        assert json.dumps(tool) in system
    assert ('<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": '
            '{"city": "Oslo", "unit": "celsius"}}\n</tool_call><|im_end|>') in text
    assert '<|im_start|>user\n<tool_response>\n{"temperature": -3}\n</tool_response><|im_end|>' in text
    assert text.endswith("<|im_start|>user\nAnd in Bergen?<|im_end|>\n<|im_start|>assistant\n")
    # A system message of the caller's own comes first, the tools after it.
    with_system = template.render([{"role": "system", "content": "Be brief."}] + HISTORY, tools=TOOLS)
    assert with_system.startswith("<|im_start|>system\nBe brief.\n\n# Tools")
    # Nothing changes for a plain chat.
    plain = [{"role": "user", "content": "Hi"}]
    assert template.render(plain) == template.render(plain, tools=None)
    assert "<tools>" not in template.render(plain)
    # The engine takes tools on the Request and tokenizes the same text.
    assert engine.tokenize_messages(HISTORY, TOOLS) == engine.prompts.tokens_for(Request(messages=HISTORY, tools=TOOLS))


def test_a_template_with_tool_support_renders_them_itself():
    template = ChatTemplate(TOOL_TEMPLATE)
    assert template.supports_tools
    text = template.render(HISTORY, tools=TOOLS)
    assert text.startswith("<|im_start|>system\n<tools>\n" + json.dumps(TOOLS[0]))
    assert "# Tools" not in text  # no injected description
    # arguments reach the template as a dict (tojson writes it back as JSON)
    assert '"arguments": {"city": "Oslo", "unit": "celsius"}}' in text
    assert '<tool_response>\n{"temperature": -3}\n</tool_response>' in text


@pytest.mark.parametrize("choice, parallel", [("required", False), ("required", True), ("web-search", False),
                                              ("get_weather", True)])
@pytest.mark.parametrize("wrapper", [HERMES, MISTRAL])
def test_tool_call_grammars_pass_the_checker(choice, parallel, wrapper):
    validate_gbnf(tool_call_grammar(TOOLS, choice, wrapper, parallel=parallel))
    validate_gbnf(tool_call_grammar(TOOLS, choice, wrapper, parallel=parallel, max_calls=3))


def test_rules_are_renamed_outside_literals_only():
    body, root = prefixed('root ::= "root space" space [a-z] <root>\nspace ::= " "?', "fn0")
    assert root == "fn0-root"
    assert body == 'fn0-root ::= "root space" fn0-space [a-z] <root>\nfn0-space ::= " "?'
    with pytest.raises(ValueError):
        tool_call_grammar(TOOLS, "nope")
    custom = CallWrapper(call_open="<call>", name_close="|", call_close="</call>")
    validate_gbnf(tool_call_grammar(TOOLS, "required", custom))


CALL_RE = re.compile(r'<tool_call>\n\{"name": "([^"]+)", "arguments": (.*)\}\n</tool_call>', re.S)
QUESTIONS = [
    "What's the weather in {city}?", "Will it rain in {city} tomorrow?", "Give me the forecast for {city}.",
    "How cold is it in {city} this week?", "Is it sunny in {city}?",
]
CITIES = ["Paris", "Tokyo", "Lagos", "Lima"]


def test_forced_calls_follow_the_schema_on_smollm2(make_engine):
    engine = make_engine(ctx=512, parallel=4)
    names = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    cases = [(q.format(city=c), i) for i, (q, c) in enumerate((q, c) for q in QUESTIONS for c in CITIES)]
    assert len(cases) == 20
    streams = []
    for prompt, i in cases:
        choice = "required" if i % 2 else "get_weather"
        grammar = tool_call_grammar(TOOLS, choice, parallel=i % 4 == 3, max_calls=2)
        sampling = SamplingParams(temperature=0.0, seed=i, max_tokens=160 if i % 4 == 3 else 80, grammar=grammar)
        streams.append(engine.submit(Request(messages=[{"role": "user", "content": prompt}], tools=TOOLS,
                                             sampling=sampling)))
    for (prompt, i), stream in zip(cases, streams):
        choice = "required" if i % 2 else "get_weather"
        result = stream.result()
        text = result.text
        assert result.finish_reason == "stop", (prompt, text)
        calls = [m.groups() for m in re.finditer(r"<tool_call>\n.*?\n</tool_call>", text, re.S)
                 for m in [CALL_RE.fullmatch(m.group(0))]]
        assert calls and "".join(re.split(r"<tool_call>\n.*?\n</tool_call>", text, flags=re.S)).strip() == ""
        for name, args in calls:
            assert name in names and (choice == "required" or name == choice), text
            jsonschema.validate(json.loads(args), names[name])
