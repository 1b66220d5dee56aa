"""Grammar-written calls read as they come (toolcalls/constrained.py, pure Python): the name
goes out once complete, the arguments in fragments as they arrive; cut anywhere, the stream
equals the whole parse; a reply cut by max_tokens keeps what was sent (a call with partial
arguments, as OpenAI does at finish_reason "length"); text that leaves the syntax is content;
only the call the engine said it constrained (and later ones) are read this way."""

from __future__ import annotations

import json

import pytest

from edge_infer.chat.families import (
    ContentDelta, ToolCallArgsDelta, ToolCallStart, fold_events, family_named,
)
from edge_infer.chat.families.constrained import FAIL, WAIT, match_loose
from tests.chat.test_families import assert_starts_before_args, fixed_ids, merged

# What each family's call grammar writes (chat/gbnf/tools.py with the wrappers).
GRAMMAR_WRITTEN = {
    "hermes": ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Pa\\"ris}", '
               '"unit": "celsius"}}\n</tool_call>\n<tool_call>\n{"name": "get_time", '
               '"arguments": {"zone": "UTC", "n": [1, {"x": "]"}]}}\n</tool_call>'),
    "mistral": ('[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Nice", "note": "}]"}}, '
                '{"name": "get_time", "arguments": {}}]'),
    "llama3": '{"name": "get_weather", "parameters": {"city": "Rome"}}; {"name": "get_time", "parameters": {"zone": "CET"}}',
}
EXPECTED = {
    "hermes": [("get_weather", {"city": 'Pa"ris}', "unit": "celsius"}),
               ("get_time", {"zone": "UTC", "n": [1, {"x": "]"}]})],
    "mistral": [("get_weather", {"city": "Nice", "note": "}]"}), ("get_time", {})],
    "llama3": [("get_weather", {"city": "Rome"}), ("get_time", {"zone": "CET"})],
}


def stream(family, pieces, **kw):
    sp = family_named(family).stream(fixed_ids(), **kw)
    out = []
    for p in pieces:
        out += sp.feed(p)
    return out + sp.finish()


def calls_of(reply):
    return [(c.name, json.loads(c.arguments_json)) for c in reply.tool_calls]


@pytest.mark.parametrize("family", sorted(GRAMMAR_WRITTEN))
def test_forced_replies_parse_to_their_calls(family):
    reply = family_named(family).parse(GRAMMAR_WRITTEN[family], fixed_ids(), constrained=True)
    assert reply.content == "" and calls_of(reply) == EXPECTED[family]
    # the same calls as the whole-call reader finds (no constraint known)
    assert calls_of(family_named(family).parse(GRAMMAR_WRITTEN[family], fixed_ids())) == EXPECTED[family]


@pytest.mark.parametrize("family", sorted(GRAMMAR_WRITTEN))
def test_every_cut_streams_the_same(family):
    text = GRAMMAR_WRITTEN[family]
    expected = fold_events(stream(family, [text], constrained=True))
    for i in range(len(text) + 1):
        assert fold_events(stream(family, [text[:i], text[i:]], constrained=True)) == expected, i


@pytest.mark.parametrize("family", sorted(GRAMMAR_WRITTEN))
def test_names_go_out_early_and_arguments_in_fragments(family):
    """Char by char: a call's start comes as soon as its name is complete, long before its
    arguments close, and its arguments come in many fragments, each after its start."""
    text = GRAMMAR_WRITTEN[family]
    sp = family_named(family).stream(fixed_ids(), constrained=True)
    first_start = first_args = None
    events = []
    for k, ch in enumerate(text):
        got = sp.feed(ch)
        if first_start is None and any(isinstance(e, ToolCallStart) for e in got):
            first_start = k
        if first_args is None and any(isinstance(e, ToolCallArgsDelta) for e in got):
            first_args = k
        events += got
    events += sp.finish()
    key = '"parameters":' if family == "llama3" else '"arguments":'
    assert first_start == text.index(key) + len(key) - 1      # the moment the name is known
    assert first_args == text.index("{", first_start)           # the arguments' first character
    frags = [e for e in events if isinstance(e, ToolCallArgsDelta) and e.index == 0]
    assert len(frags) > 10 and "".join(f.fragment for f in frags) == json.dumps(EXPECTED[family][0][1])
    assert_starts_before_args(events)


@pytest.mark.parametrize("family", sorted(GRAMMAR_WRITTEN))
def test_a_reply_cut_anywhere_keeps_what_was_sent(family):
    """max_tokens can end a forced reply mid-call: what was streamed stays, the whole parse
    says the same (partial arguments), and nothing raises."""
    text = GRAMMAR_WRITTEN[family]
    for i in range(len(text) + 1):
        events = stream(family, [text[:i]], constrained=True)
        whole = family_named(family).parse(text[:i], fixed_ids(), constrained=True)
        assert fold_events(events) == whole, i
        for call, (name, args) in zip(whole.tool_calls, EXPECTED[family]):
            assert call.name == name
            assert json.dumps(args).startswith(call.arguments_json), (i, call)
        if not whole.tool_calls:
            assert whole.content == text[:i], i  # exactly as generated


def test_text_that_leaves_the_syntax_ends_the_call_and_is_content():
    text = '<tool_call>\n{"name": "f", "arguments": {"a": 1}} oops, not the close tag'
    reply = family_named("hermes").parse(text, fixed_ids(), constrained=True)
    assert calls_of(reply) == [("f", {"a": 1})] and reply.content == "} oops, not the close tag"
    reply = family_named("hermes").parse("Hello <tool_call> no JSON here", fixed_ids(), constrained=True)
    assert reply.tool_calls == [] and reply.content == "Hello <tool_call> no JSON here"


def test_only_the_call_the_engine_constrained_and_later_ones_stream_early():
    """A free call earlier in the reply is read whole (it may be malformed); the flag comes
    after the piece whose token began the constrained call."""
    free = '<tool_call>{"name": "g"}</tool_call> then <tool_call>'
    rest = '\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>'
    reply = family_named("hermes").parse([free, rest], fixed_ids(), call_began_at=0)
    assert calls_of(reply) == [("g", {}), ("f", {"a": 1})] and reply.content == "then"
    sp = family_named("hermes").stream(fixed_ids())
    events = sp.feed(free)
    sp.call_began()
    partial = sp.feed(rest[:24])  # '\n{"name": "f", "argument...' : name not closed yet
    assert not any(isinstance(e, ToolCallStart) and e.name == "f" for e in partial)
    more = sp.feed(rest[24:36])
    assert any(isinstance(e, ToolCallStart) and e.name == "f" for e in more)
    events += partial + more + sp.feed(rest[36:]) + sp.finish()
    assert fold_events(events) == reply


@pytest.mark.parametrize("before", ["{#tool_call}\n", "[1, 2] ", "```json\n{", '{"name": "g", "arguments": {}}\n'])
def test_a_call_the_engine_began_inside_a_pending_region_ends_that_region(before):
    """A reply that opened as a bare JSON value (or a fence) holds its text until the end;
    when the engine's call grammar takes over at a later <tool_call> (SmolLM2 wrote
    '{#tool_call}\n<tool_call>...' under auto), the region ends at that marker: before it
    is decided as it stands (content, or a call when it is one) and the call is read."""
    opened = before + "<tool_call>\n"
    rest = '{"name": "f", "arguments": {"a": 1}}\n</tool_call>'
    reply = family_named("hermes").parse([opened, rest], fixed_ids(), call_began_at=0)
    earlier = [("g", {})] if before.startswith('{"name"') else []
    assert calls_of(reply) == earlier + [("f", {"a": 1})]
    assert reply.content == ("" if earlier else before.strip())
    sp = family_named("hermes").stream(fixed_ids())
    events = sp.feed(opened)
    began = sp.call_began()
    events += began + sp.feed(rest[:28])
    assert any(isinstance(e, ToolCallStart) and e.name == "f" for e in events)  # before the end
    assert fold_events(events + sp.feed(rest[28:]) + sp.finish()) == reply


def test_without_the_flag_a_call_is_decided_whole():
    text = GRAMMAR_WRITTEN["hermes"]
    events = family_named("hermes").stream(fixed_ids())
    got = events.feed(text[:60])  # mid-arguments
    assert got == []                # nothing yet: it may still turn out malformed


def test_reasoning_before_a_forced_call_is_still_split():
    text = "<think>Weather needs a call.</think>" + GRAMMAR_WRITTEN["hermes"]
    reply = family_named("hermes").parse(text, fixed_ids(), constrained=True)
    assert reply.reasoning == "Weather needs a call." and calls_of(reply) == EXPECTED["hermes"]


def test_families_without_a_json_wrapper_ignore_the_flag():
    from tests.chat.test_families import FGEMMA_PARALLEL
    plain = merged(stream("function_gemma", [FGEMMA_PARALLEL]))
    assert merged(stream("function_gemma", [FGEMMA_PARALLEL], constrained=True)) == plain
    assert merged(stream("generic", ['{"name": "a", "arguments": {}}'], constrained=True)) == \
        merged(stream("generic", ['{"name": "a", "arguments": {}}']))


def test_loose_literals():
    assert match_loose('<tool_call>\n{"name": "f', 0, '<tool_call>\n{"name": "', False) == 22
    assert match_loose('<tool_call>{"name":"f', 0, '<tool_call>\n{"name": "', False) == 20
    assert match_loose("<tool_c", 0, "<tool_call>", False) == WAIT
    assert match_loose("<tool_c", 0, "<tool_call>", True) == FAIL
    assert match_loose("<tool_x", 0, "<tool_call>", False) == FAIL
    assert match_loose("abc", 1, "", False) == 1
    assert isinstance(ContentDelta("x"), ContentDelta)


@pytest.mark.parametrize("cut", ['}\n</tool', '}\n</tool_call>\n<tool_', '}\n</tool_call>\n<tool_call>\n{"na',
                                 '}\n</tool_call>\n<tool_call>\n{"name": "get_wea'])
def test_a_forced_reply_cut_in_its_syntax_leaves_no_stray_content(cut):
    """max_tokens inside a call's closing or the next call's opening: those are the calls'
    syntax, not text for the client (they used to come out as content, e.g. '}\\n</tool')."""
    text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}' + cut
    reply = family_named("hermes").parse(text, fixed_ids(), constrained=True)
    assert reply.content == "" and [c.name for c in reply.tool_calls] == ["get_weather"]
