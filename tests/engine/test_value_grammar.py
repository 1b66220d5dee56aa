"""Call grammars in every family's own syntax: FunctionGemma's `{k:<escape>v<escape>}` and
Gemma tool_code's Python keywords come from our JSON Schema converter (values.py), the
JSON families from json_schema.py. Checked as GBNF, then on the real SmolLM2: whatever a
forced grammar (or a continuation after the family's trigger) lets it write, the family's
parser reads back and the arguments validate against the schema."""

from __future__ import annotations

import json

import jsonschema
import pytest

from edge_infer.engine import Request, SamplingParams
from edge_infer.chat import (WRAPPERS, ToolGrammarError, families as toolcalls, tool_call_continuation,
                             tool_call_grammar, validate_gbnf)
from edge_infer.chat.gbnf.tools import literal
from edge_infer.chat.gbnf.values import FUNCTION_GEMMA, PYTHON, arguments_grammar

# A schema with what tool schemas use: required and optional keys, enum, bounded strings,
# integers, booleans, nullable, arrays with bounds, a nested object and a $ref.
BOOKING = {"type": "object", "properties": {
    "city": {"type": "string", "minLength": 2, "maxLength": 20},
    "nights": {"type": "integer"},
    "room": {"enum": ["single", "double", "suite"]},
    "breakfast": {"type": "boolean"},
    "guests": {"type": "array", "items": {"$ref": "#/$defs/guest"}, "minItems": 1, "maxItems": 2},
    "note": {"type": ["string", "null"], "maxLength": 30},
}, "required": ["city", "nights", "room", "guests"], "additionalProperties": False,
    "$defs": {"guest": {"type": "object", "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 16}, "age": {"type": "integer"}},
        "required": ["name"]}}}
OPTIONAL_ONLY = {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "string", "maxLength": 5},
                                                  "c": {"type": "boolean"}}}
FREE = {"type": "object"}
SCHEMAS = {"booking": BOOKING, "optional_only": OPTIONAL_ONLY, "free": FREE}
FAMILIES = ["hermes", "mistral", "llama3", "function_gemma", "gemma"]


def tool(name, schema):
    return {"type": "function", "function": {"name": name, "parameters": schema}}


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("schema", sorted(SCHEMAS))
def test_call_grammars_are_valid_gbnf(family, schema):
    tools = [tool("book", SCHEMAS[schema]), tool("other_tool", OPTIONAL_ONLY)]
    validate_gbnf(tool_call_grammar(tools, "required", WRAPPERS[family], parallel=True, max_calls=3))
    validate_gbnf(tool_call_continuation(tools, WRAPPERS[family], parallel=False))


def test_python_arguments_are_keywords_and_function_gemma_keys_are_bare():
    py = arguments_grammar(BOOKING, PYTHON)
    assert py.startswith('root ::= ("city=" "\\"" char{2,20} "\\"" ", " "nights=" integer')
    assert '"True" | "False"' in py and '"None"' in py
    fg = arguments_grammar(BOOKING, FUNCTION_GEMMA)
    # a bounded FunctionGemma string leaves "<" out: "<x" would be two characters in one repetition
    assert fg.startswith('root ::= "{" ("city:" "<escape>" ([^<\\x00-\\x08\\x0B-\\x1F\\x7F]){2,20} "<escape>" "," '
                         '"nights:" integer')  # no raw control character but tab and newline
    assert '"<escape>double<escape>"' in fg


@pytest.mark.parametrize("family, key", [("function_gemma", "my key"), ("gemma", "class"), ("gemma", "2x")])
def test_a_key_the_syntax_cannot_write_is_refused_naming_the_tool(family, key):
    schema = {"type": "object", "properties": {key: {"type": "string"}}}
    with pytest.raises(ToolGrammarError, match=repr(key)) as err:
        tool_call_grammar([tool("ok", FREE), tool("bad", schema)], "required", WRAPPERS[family])
    assert err.value.index == 1


def test_a_dangling_ref_is_refused():
    with pytest.raises(ToolGrammarError, match="points at nothing"):
        tool_call_grammar([tool("f", {"type": "object", "properties": {"x": {"$ref": "#/$defs/nope"}}})],
                          "required", WRAPPERS["gemma"])


PROMPT = ("<|im_start|>user\nBook two nights in a double room in Oslo for Ada (36).<|im_end|>\n"
          "<|im_start|>assistant\n")


@pytest.mark.parametrize("family", FAMILIES)
def test_what_a_forced_grammar_lets_the_model_write_its_family_reads(make_engine, family):
    engine = make_engine()
    tools = [tool("book_hotel", BOOKING), tool("other_tool", OPTIONAL_ONLY)]
    grammar = tool_call_grammar(tools, "required", WRAPPERS[family])
    parser = toolcalls.family_named(family)
    for seed in range(3):
        done = engine.generate(Request(prompt=PROMPT, sampling=SamplingParams(
            temperature=0.9, seed=seed, max_tokens=250, grammar=grammar)))
        text = done.text
        assert done.finish_reason == "stop", text  # the grammar ended the reply
        reply = parser.parse(text)
        assert len(reply.tool_calls) == 1 and not reply.content, text
        for call in reply.tool_calls:
            schema = {"book_hotel": BOOKING, "other_tool": OPTIONAL_ONLY}[call.name]
            jsonschema.validate(json.loads(call.arguments_json), schema)


@pytest.mark.parametrize("family", ["function_gemma", "gemma"])
def test_after_its_trigger_a_call_in_a_non_json_syntax_follows_its_schema(make_engine, family):
    """The continuation grammar (tool_choice auto) of the families whose arguments are not
    JSON: the trigger, then what the grammar lets the model write; the parser reads it."""
    wrapper = WRAPPERS[family]
    rest = tool_call_continuation([tool("book_hotel", BOOKING)], wrapper, parallel=True, max_calls=2)
    whole = rest.replace("root ::= ", f"root ::= {literal(wrapper.trigger)} ", 1)
    text = make_engine().generate(Request(prompt=PROMPT, sampling=SamplingParams(
        temperature=0.8, seed=5, max_tokens=200, grammar=whole))).text
    reply = toolcalls.family_named(family).parse(text)
    assert reply.tool_calls, text
    for call in reply.tool_calls:
        jsonschema.validate(json.loads(call.arguments_json), BOOKING)


def test_a_property_of_annotations_alone_allows_any_value():
    """{"description": ...} with no type is any JSON value (JSON Schema's rule; Claude Code's
    Workflow tool has one): the call grammar builds, and both a string and an object fit it."""
    tool = {"type": "function", "function": {"name": "run", "parameters": {"type": "object", "properties": {
        "args": {"description": "any value, passed verbatim"}, "n": {"type": "integer"}}}}}
    grammar = tool_call_grammar([tool], "required", WRAPPERS["hermes"])
    validate_gbnf(grammar)
