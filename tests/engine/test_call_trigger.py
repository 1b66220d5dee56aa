"""tool_choice "auto": once a reply writes the call trigger, the rest of it follows the call
grammar. On the real SmolLM2 with a trigger it is sure to write (a token ending in "e"), so
the switch is checked deterministically: the text before it is unchanged, after it the
grammar rules; plus the pure trigger rule on fake sequences, and a bad call grammar refused
at submit."""

from types import SimpleNamespace

import pytest

from edge_infer.engine import BadRequestError, Request, SamplingParams
from edge_infer.engine.postprocess import call_began

PROMPT = "<|im_start|>user\nWrite one sentence about the sea.<|im_end|>\n<|im_start|>assistant\n"


def greedy(**kw):
    return SamplingParams(temperature=0.0, max_tokens=40, **kw)


def test_after_the_trigger_the_call_grammar_rules_and_before_it_nothing_changes(make_engine):
    engine = make_engine()
    free = engine.generate(Request(prompt=PROMPT, sampling=greedy())).text
    got = engine.generate(Request(prompt=PROMPT, sampling=greedy(
        call_trigger="e", call_grammar='root ::= [ \\t\\n]* "[CALL]"')))
    assert got.text.endswith("[CALL]") and got.finish_reason == "stop"
    before = got.text[: -len("[CALL]")].rstrip()
    assert before.endswith("e") and free.startswith(before)      # the same text up to the switch
    again = engine.generate(Request(prompt=PROMPT, sampling=greedy()))
    assert again.text == free                                     # the next request is unconstrained


def test_a_call_grammar_is_checked_before_anything_runs(make_engine):
    engine = make_engine()
    with pytest.raises(BadRequestError, match="invalid grammar"):
        engine.submit(Request(prompt=PROMPT, sampling=greedy(call_trigger="<tool_call>",
                                                             call_grammar='root ::= "a" undefined')))


def seq(trigger, grammar=None):
    return SimpleNamespace(params=SimpleNamespace(call_trigger=trigger, grammar=grammar), call_window="")


def test_the_trigger_fires_once_the_text_ends_with_it_and_whitespace():
    s = seq("<tool_call>")
    assert [call_began(s, p) for p in (b"Sure. <", b"tool", b"_call", b">")] == [False, False, False, True]
    s = seq("<tool_call>")
    assert [call_began(s, p) for p in (b"<tool_call", b">\n")] == [False, True]   # a newline in its token
    s = seq("<tool_call>")
    assert [call_began(s, p) for p in (b"<tool_call>{", b'"')] == [False, False]  # text after it: not at a boundary
    assert not call_began(seq(None), b"<tool_call>")
    assert not call_began(seq("<tool_call>", grammar="root ::= x"), b"<tool_call>")  # already constrained


WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                     "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
    "required": ["city", "unit"], "additionalProperties": False}}}


@pytest.mark.parametrize("family", ["hermes", "mistral", "llama3"])
@pytest.mark.parametrize("parallel", [False, True])
def test_what_a_continuation_grammar_lets_the_model_write_its_family_parses(make_engine, family, parallel):
    """The trigger, then whatever the continuation grammar allows the real model to write:
    the family's parser finds the calls and their arguments follow the schema."""
    import json

    import jsonschema

    from edge_infer.chat import WRAPPERS, tool_call_continuation, families as toolcalls
    from edge_infer.chat.gbnf.check import validate_gbnf
    from edge_infer.chat.gbnf.tools import literal

    wrapper = WRAPPERS[family]
    rest = tool_call_continuation([WEATHER], wrapper, parallel=parallel, max_calls=3)
    validate_gbnf(rest)
    whole = rest.replace("root ::= ", f"root ::= {literal(wrapper.trigger)} ", 1)
    prompt = "<|im_start|>user\nWhat is the weather in Oslo?<|im_end|>\n<|im_start|>assistant\n"
    text = make_engine().generate(Request(prompt=prompt, sampling=SamplingParams(
        temperature=0.8, seed=3, max_tokens=120, grammar=whole))).text
    reply = toolcalls.family_named(family).parse(text)
    assert reply.tool_calls, text
    for call in reply.tool_calls:
        assert call.name == "get_weather"
        jsonschema.validate(json.loads(call.arguments_json), WEATHER["function"]["parameters"])
