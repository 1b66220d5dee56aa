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
