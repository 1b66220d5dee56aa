"""Tool-call parsers per family (pure Python): whole replies, streamed replies cut at
every position, hold-back of marker-like text, malformed calls as content, registry."""

from __future__ import annotations

import itertools
import json
import re

import pytest

from edge_infer.chat.families import (
    ContentDelta, ParsedReply, ReasoningDelta, ReasoningSplitter, ToolCall, ToolCallArgsDelta,
    Family, ToolCallStart, family_for, family_named, family_names, fold_events, new_call_id, opens_in_reasoning,
    register, unregister,
)


def fixed_ids():
    counter = itertools.count(1)
    return lambda: f"call_{next(counter):024d}"


def merged(events):
    """Adjacent content (or reasoning) deltas joined: how a client sees them."""
    out = []
    for ev in events:
        if out and type(ev) in (ContentDelta, ReasoningDelta) and type(out[-1]) is type(ev):
            out[-1] = type(ev)(out[-1].text + ev.text)
        else:
            out.append(ev)
    return out


def run_chunks(parser, chunks, **kw):
    sp = parser.stream(fixed_ids(), **kw)
    events = []
    for c in chunks:
        events += sp.feed(c)
    return events + sp.finish()


def whole_events(parser, text, **kw):
    return merged(run_chunks(parser, [text], **kw))


def assert_starts_before_args(events):
    """A call starts before any of its argument fragments."""
    seen = set()
    for e in events:
        if isinstance(e, ToolCallStart):
            seen.add(e.index)
        elif isinstance(e, ToolCallArgsDelta):
            assert e.index in seen


def call(name, **args):
    return (name, args)


def summary(reply: ParsedReply):
    return reply.content, [(c.name, json.loads(c.arguments_json)) for c in reply.tool_calls]


# --- recorded replies: (family, text, expected content, expected calls) ------------------

HERMES_SINGLE = ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", '
                 '"unit": "celsius"}}\n</tool_call>')
HERMES_PARALLEL = ('I\'ll check both cities.\n\n<tool_call>\n{"name": "get_weather", "arguments": '
                   '{"city": "Tokyo"}}\n</tool_call>\n<tool_call>\n{"name": "get_time", '
                   '"arguments": {"tz": "Asia/Tokyo"}}\n</tool_call>')
HERMES_NESTED = ('<tool_call>\n{"name": "write_file", "arguments": {"path": "a}b.json", '
                 '"content": "{\\"k\\": [1, 2]} </tool_call is \\"quoted\\" — ünï ☃", '
                 '"opts": {"mode": [1, {"x": null}]}}}\n</tool_call>')
HERMES_THINK = ('<think>\nThe user wants weather. I should call the tool.\n</think>\n\n'
                '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>')
LLAMA_BARE = '{"name": "get_weather", "parameters": {"city": "Rome", "days": 3}}'
LLAMA_TAG = '<|python_tag|>{"type": "function", "name": "search", "parameters": {"q": "a {b}"}}'
LLAMA_BUILTIN = '<|python_tag|>brave_search.call(query="current weather in Menlo Park")'
LLAMA_TEXT_BEFORE = 'Let me look that up. {"name": "lookup", "parameters": {"id": 7}}'
MISTRAL_V3 = ('[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Lyon"}, '
              '"id": "a1b2c3d4e"}, {"name": "get_time", "arguments": {"tz": "CET"}, '
              '"id": "f5g6h7i8j"}]')
MISTRAL_V11 = ('[TOOL_CALLS]get_weather[ARGS]{"city": "Nice", "note": "[ARGS] inside {x}"}'
               '[TOOL_CALLS]get_time[CALL_ID]Ab3dE6gH9[ARGS]{"tz": "UTC"}')
FGEMMA_PARALLEL = ('<start_function_call>call:get_weather{location:<escape>Tokyo, JP<escape>,'
                   'unit:<escape>celsius<escape>}<end_function_call><start_function_call>'
                   'call:get_stock_price{symbol:<escape>GOOG<escape>,limit:5,live:true,'
                   'tags:[<escape>a,b<escape>,<escape>{c}<escape>],'
                   'range:{from:<escape>2024<escape>,step:0.5}}<end_function_call>')
GEMMA_TOOL_CODE = ('```tool_code\nprint(default_api.get_weather(city="São Paulo", days=2, '
                   'hourly=True))\n```')
GEMMA_JSON_FENCE = ('Here is the call:\n```json\n{"name": "get_weather", "arguments": '
                    '{"city": "Kyiv"}}\n```')
QWEN3_CODER = ('Running it.\n<tool_call>\n<function=run_shell>\n<parameter=cmd>\necho "{hi}" && ls\n'
               '</parameter>\n<parameter=timeout>\n30\n</parameter>\n</function>\n</tool_call>')
GENERIC_BARE = '[{"name": "a", "arguments": {"x": 1}}, {"name": "b", "parameters": {}}]'

CASES = [
    ("hermes", HERMES_SINGLE, "", [call("get_weather", city="Paris", unit="celsius")]),
    ("hermes", HERMES_PARALLEL, "I'll check both cities.",
     [call("get_weather", city="Tokyo"), call("get_time", tz="Asia/Tokyo")]),
    ("hermes", HERMES_NESTED, "",
     [call("write_file", path="a}b.json",
           content='{"k": [1, 2]} </tool_call is "quoted" — ünï ☃',
           opts={"mode": [1, {"x": None}]})]),
    ("hermes", QWEN3_CODER, "Running it.", [call("run_shell", cmd='echo "{hi}" && ls', timeout=30)]),
    ("llama3", LLAMA_BARE, "", [call("get_weather", city="Rome", days=3)]),
    ("llama3", LLAMA_TAG, "", [call("search", q="a {b}")]),
    ("llama3", LLAMA_BUILTIN, "", [call("brave_search", query="current weather in Menlo Park")]),
    ("llama3", LLAMA_TEXT_BEFORE, "Let me look that up.", [call("lookup", id=7)]),
    ("mistral", MISTRAL_V3, "", [call("get_weather", city="Lyon"), call("get_time", tz="CET")]),
    ("mistral", MISTRAL_V11, "",
     [call("get_weather", city="Nice", note="[ARGS] inside {x}"), call("get_time", tz="UTC")]),
    ("function_gemma", FGEMMA_PARALLEL, "",
     [call("get_weather", location="Tokyo, JP", unit="celsius"),
      call("get_stock_price", symbol="GOOG", limit=5, live=True, tags=["a,b", "{c}"],
           range={"from": "2024", "step": 0.5})]),
    ("gemma", GEMMA_TOOL_CODE, "", [call("get_weather", city="São Paulo", days=2, hourly=True)]),
    ("gemma", GEMMA_JSON_FENCE, "Here is the call:", [call("get_weather", city="Kyiv")]),
    ("generic", GENERIC_BARE, "", [call("a", x=1), call("b")]),
    ("generic", GEMMA_JSON_FENCE, "Here is the call:", [call("get_weather", city="Kyiv")]),
]
CASE_IDS = [f"{f}-{i}" for i, (f, *_rest) in enumerate(CASES)]


@pytest.mark.parametrize("family,text,content,calls", CASES, ids=CASE_IDS)
def test_whole_parse(family, text, content, calls):
    reply = family_named(family).parse(text, fixed_ids())
    assert summary(reply) == (content, [(n, a) for n, a in calls])
    assert [c.id for c in reply.tool_calls] == [f"call_{i:024d}" for i in range(1, len(calls) + 1)]
    assert reply.reasoning is None


@pytest.mark.parametrize("family,text,content,calls", CASES, ids=CASE_IDS)
def test_every_single_cut_streams_the_same(family, text, content, calls):
    parser = family_named(family)
    expected = whole_events(parser, text)
    for i in range(len(text) + 1):
        assert merged(run_chunks(parser, [text[:i], text[i:]])) == expected, i


@pytest.mark.parametrize("family,text,content,calls", CASES, ids=CASE_IDS)
def test_char_by_char_never_retracts(family, text, content, calls):
    """Fed one character at a time: same final events, and content seen so far is
    always a prefix of the final content (nothing emitted is ever taken back)."""
    parser = family_named(family)
    expected = whole_events(parser, text)
    final_content = fold_events(expected).content
    sp = parser.stream(fixed_ids())
    events = []
    for ch in text:
        events += sp.feed(ch)
        assert final_content.startswith(fold_events(events).content)
        starts = [e for e in events if isinstance(e, ToolCallStart)]
        assert len(starts) <= len(calls)
    events += sp.finish()
    assert merged(events) == expected


@pytest.mark.parametrize("family,text", [("hermes", HERMES_PARALLEL), ("mistral", MISTRAL_V11),
                                         ("function_gemma", FGEMMA_PARALLEL[:120])])
def test_every_pair_of_cuts_streams_the_same(family, text):
    parser = family_named(family)
    expected = whole_events(parser, text)
    n = len(text)
    for i in range(0, n + 1, 2):
        for j in range(i, n + 1, 3):
            assert merged(run_chunks(parser, [text[:i], text[i:j], text[j:]])) == expected, (i, j)


@pytest.mark.parametrize("family,text,content,calls", CASES, ids=CASE_IDS)
def test_streamed_args_reassemble_to_whole_parse(family, text, content, calls):
    parser = family_named(family)
    whole = parser.parse(text, fixed_ids())
    events = run_chunks(parser, [text[k:k + 5] for k in range(0, len(text), 5)])
    starts = [e for e in events if isinstance(e, ToolCallStart)]
    assert [(s.index, s.name) for s in starts] == [(i, c.name) for i, c in enumerate(whole.tool_calls)]
    for s, c in zip(starts, whole.tool_calls):
        frags = [e.fragment for e in events if isinstance(e, ToolCallArgsDelta) and e.index == s.index]
        assert "".join(frags) == c.arguments_json
        assert s.id == c.id
    assert_starts_before_args(events)


@pytest.mark.parametrize("family,text,content,calls", CASES, ids=CASE_IDS)
def test_every_truncation_is_content_or_calls_never_an_error(family, text, content, calls):
    """A reply cut anywhere (max_tokens): no exception; with no call decided, the
    held text comes out as content, exactly as generated."""
    parser = family_named(family)
    for i in range(len(text) + 1):
        reply = parser.parse(text[:i], fixed_ids())
        if not reply.tool_calls:
            assert reply.content == text[:i], i
        else:
            assert len(reply.tool_calls) <= len(calls)


MALFORMED = [
    ("hermes", '<tool_call>\n{"name": "f", "arguments": {"a": 1}\n</tool_call>'),
    ("hermes", '<tool_call>{"name": "f", "arguments": {"a": </tool_call>'),
    ("hermes", '<tool_call>not json at all</tool_call>'),
    ("hermes", '<tool_call>{"nom": "f"}</tool_call>'),
    ("mistral", '[TOOL_CALLS] [{"name": "f", "arguments": {"a": 1}]'),
    ("mistral", '[TOOL_CALLS]f[ARGS]{"a": 1'),
    ("mistral", '[TOOL_CALLS]f then text'),
    ("function_gemma", '<start_function_call>call:f{a:<escape>x}<end_function_call>'),
    ("function_gemma", '<start_function_call>call f(a=1)<end_function_call>'),
    ("gemma", '```tool_code\nprint(default_api.f(1, 2))\n```'),
    ("gemma", '```tool_code\nimport os; os.system("x")\n```'),
    ("llama3", '{"name": "Bob", "age": 42}'),
    ("llama3", '<|python_tag|>{"name": "f", "parameters": {"a": 1}'),
    ("generic", '{"name": "f", "arguments": [1, 2]}'),
    ("generic", '```json\n{"just": "data"}\n```'),
]


@pytest.mark.parametrize("family,text", MALFORMED)
def test_malformed_call_is_content(family, text):
    parser = family_named(family)
    reply = parser.parse(text, fixed_ids())
    assert reply == ParsedReply(text, [], None)
    for i in range(len(text) + 1):
        assert merged(run_chunks(parser, [text[:i], text[i:]])) == [ContentDelta(text)], i


@pytest.mark.parametrize("family,head,tail", [
    ("hermes", "<tool", "s are great"),
    ("hermes", "Use <tool_", "call> tags, e.g."),
    ("mistral", "[TOOL_", "CALLING] is a word"),
    ("function_gemma", "<start_function", "> is a tag"),
    ("gemma", "```tool", "box\nls\n```"),
    ("llama3", 'A set {"na', 'ive", 1}'),
    ("llama3", "<|python_", "tag| is not"),
])
def test_marker_like_prefix_is_held_then_released_as_text(family, head, tail):
    parser = family_named(family)
    sp = parser.stream(fixed_ids())
    first = sp.feed(head)
    held = head[len(fold_events(first).content):]
    assert held and tail  # something marker-like was held, not emitted
    rest = sp.feed(tail) + sp.finish()
    assert fold_events(first + rest) == ParsedReply(head + tail, [], None)


def test_plain_text_with_braces_streams_without_holding_much():
    parser = family_named("llama3")
    sp = parser.stream(fixed_ids())
    out = sp.feed('Use a dict like {"a": 1} here ')
    assert fold_events(out).content == 'Use a dict like {"a": 1} here'
    assert fold_events(out + sp.finish()).content == 'Use a dict like {"a": 1} here '


def test_text_after_calls_is_content_and_whitespace_between_is_dropped():
    text = ('<tool_call>{"name": "a", "arguments": {}}</tool_call>\n\n'
            '<tool_call>{"name": "b", "arguments": "{\\"x\\": 2}"}</tool_call>\nDone. \n')
    reply = family_named("hermes").parse(text, fixed_ids())
    assert summary(reply) == ("Done.", [("a", {}), ("b", {"x": 2})])


def test_hermes_unclosed_but_complete_call_at_end_counts():
    text = '<tool_call>\n{"name": "f", "arguments": {"q": "x"}}\n'
    reply = family_named("hermes").parse(text, fixed_ids())
    assert summary(reply) == ("", [("f", {"q": "x"})])


def test_reasoning_then_call():
    parser = family_named("hermes")
    reply = parser.parse(HERMES_THINK, fixed_ids())
    assert reply.reasoning == "The user wants weather. I should call the tool.\n"
    assert summary(reply) == ("", [("get_weather", {"city": "Oslo"})])
    expected = whole_events(parser, HERMES_THINK)
    for i in range(len(HERMES_THINK) + 1):
        assert merged(run_chunks(parser, [HERMES_THINK[:i], HERMES_THINK[i:]])) == expected, i


REASONING = [
    # (text, starts_in_reasoning, reasoning, content)
    ("<think>\nweigh options\n</think>\n\nThe answer is 4.", False, "weigh options\n", "The answer is 4."),
    ("weigh options</think>The answer.", True, "weigh options", "The answer."),
    ("<think>never closed because max_tok", False, "never closed because max_tok", ""),
    ("still thinking", True, "still thinking", ""),
    ("No reasoning here.", False, None, "No reasoning here."),
    ("Text then <think>not reasoning</think>", False, None, "Text then <think>not reasoning</think>"),
    ("<thin king>", False, None, "<thin king>"),
    ("<think></think>Hi", False, "", "Hi"),
    ("\n\n<think>r</think>c", False, "r", "c"),
    ("  plain  ", False, None, "  plain  "),
]


@pytest.mark.parametrize("text,starts,reasoning,content", REASONING)
def test_reasoning_splitter_whole_and_streamed(text, starts, reasoning, content):
    assert ReasoningSplitter(starts).split(text) == (reasoning, content)
    whole = ReasoningSplitter(starts)
    expected = merged(whole.feed(text) + whole.finish())
    for i in range(len(text) + 1):
        s = ReasoningSplitter(starts)
        events = []
        for chunk in (text[:i], text[i:]):
            events += s.feed(chunk)
            so_far = "".join(e.text for e in events if isinstance(e, ContentDelta))
            assert content.startswith(so_far)
        assert merged(events + s.finish()) == expected, i


def test_reasoning_partial_tag_is_held():
    s = ReasoningSplitter(starts_in_reasoning=True)
    assert s.feed("thinking </thi") == [ReasoningDelta("thinking ")]
    assert s.feed("nk>done") == [ContentDelta("done")]
    assert s.finish() == []


def test_opens_in_reasoning():
    assert opens_in_reasoning("<|im_start|>assistant\n<think>\n")
    assert not opens_in_reasoning("<|im_start|>assistant\n")
    assert not opens_in_reasoning(None)


def test_parse_starting_inside_reasoning():
    text = "I need the tool.</think><tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>"
    reply = family_named("hermes").parse(text, fixed_ids(), starts_in_reasoning=True)
    assert reply.reasoning == "I need the tool."
    assert summary(reply) == ("", [("f", {})])


# --- registry --------------------------------------------------------------------------

QWEN_TMPL = ('{%- if tools %}{{- "<|im_start|>system\\n" }}For each function call, return a json '
             'object within <tool_call></tool_call> XML tags{%- endif %}')
MISTRAL_TMPL = '{%- if message.tool_calls %}{{- "[TOOL_CALLS][" }}{%- endif %}[INST]'
LLAMA31_TMPL = ('<|start_header_id|>ipython<|end_header_id|>{%- if builtin_tools is defined %}'
                '{{- "<|python_tag|>" }}{%- endif %}')
LLAMA32_TMPL = '{{- "<|start_header_id|>system<|end_header_id|>" }}{%- if tools is not none %}'
FGEMMA_TMPL = '{{- "<start_function_declaration>" }}...{{ "<start_function_call>" }}'
GEMMA3_TMPL = "{{ bos_token }}{%- for message in messages %}<start_of_turn>{{ role }}"
SMOL_TMPL = "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"


@pytest.mark.parametrize("tmpl,arch,family", [
    (QWEN_TMPL, "qwen2", "hermes"),
    (MISTRAL_TMPL, "llama", "mistral"),
    (LLAMA31_TMPL, "llama", "llama3"),
    (LLAMA32_TMPL, "llama", "llama3"),
    (FGEMMA_TMPL, "gemma3", "function_gemma"),
    (GEMMA3_TMPL, "gemma3", "gemma"),
    (GEMMA3_TMPL, "llama", "generic"),
    ("Use ```tool_code blocks", None, "gemma"),
    (SMOL_TMPL, "llama", "generic"),
    (None, None, "generic"),
    ("", "gemma3", "gemma"),
])
def test_parser_for_picks_family_from_template(tmpl, arch, family):
    assert family_for(tmpl, arch).name == family


def test_family_markers():
    assert family_named("hermes").triggers == ("<tool_call>",)
    assert family_named("mistral").triggers == ("[TOOL_CALLS]",)
    assert family_named("function_gemma").triggers == ("<start_function_call>",)
    assert "<|python_tag|>" in family_named("llama3").triggers
    assert "```tool_code" in family_named("gemma").triggers
    assert set(family_names()) >= {"hermes", "llama3", "mistral", "function_gemma", "gemma", "generic"}


def test_a_family_is_one_object():
    from edge_infer.chat.families.matchers import Tagged

    register(Family("test_granite", detect=lambda tmpl, arch: "<|tool_call|>" in tmpl,
                    matchers=lambda: [Tagged("<|tool_call|>", "<|end|>")], triggers=("<|tool_call|>",), priority=5))
    try:
        family = family_for("... <|tool_call|> ...", "granite")
        assert family.name == "test_granite"
        reply = family.parse('ok<|tool_call|>[{"name": "f", "arguments": {"a": 1}}]<|end|>', fixed_ids())
        assert summary(reply) == ("ok", [("f", {"a": 1})])
    finally:
        unregister("test_granite")
    assert family_for("... <|tool_call|> ...", "granite").name == "generic"


def test_each_family_holds_its_call_syntax_and_reasoning_markers():
    from edge_infer.chat import WRAPPERS

    assert family_named("hermes").wrapper.trigger == "<tool_call>"
    assert family_named("gemma").wrapper.syntax == "python"
    assert family_named("function_gemma").wrapper.syntax == "function_gemma"
    assert family_named("generic").wrapper is None
    assert family_named("hermes").reasoning == ("<think>", "</think>")
    assert WRAPPERS == {f: family_named(f).wrapper for f in ("hermes", "mistral", "llama3", "function_gemma", "gemma")}


def test_default_call_ids():
    assert re.fullmatch(r"call_[A-Za-z0-9]{24}", new_call_id())
    assert new_call_id() != new_call_id()
    reply = family_named("hermes").parse(HERMES_SINGLE)
    assert re.fullmatch(r"call_[A-Za-z0-9]{24}", reply.tool_calls[0].id)


def test_finish_is_idempotent_and_feed_after_finish_is_ignored():
    sp = family_named("hermes").stream(fixed_ids())
    sp.feed("<tool_call>{\"name\": ")
    out = sp.finish()
    assert fold_events(out).content == "<tool_call>{\"name\": "
    assert sp.finish() == [] and sp.feed("more") == []


def test_exported_through_the_chat_package():
    from edge_infer import chat

    assert chat.families.family_for(QWEN_TMPL, "qwen2").name == "hermes"


def test_tool_call_dataclass_shape():
    assert ToolCall("f", "{}") == ToolCall(name="f", arguments_json="{}", id="")


FRAGMENTS = ["<tool_call>", "</tool_call>", "{", "}", '"name"', ":", '"f"', ",", '"arguments"',
             '"parameters"', "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", "<start_function_call>",
             "call:f", "<escape>", "<end_function_call>", "```tool_code\n", "```json\n", "```",
             "<think>", "</think>", "<|python_tag|>", "x", " ", "\n", "print(f(a=1))", '"', "\\",
             "[", "]", "a:1", "<function=f>", "<parameter=a>", "</parameter>", "</function>",
             '{"name": "f", "arguments": {}}', "<tool", "[TOOL", '{"na']


@pytest.mark.parametrize("seed", range(3))
def test_random_marker_soup_streams_like_whole_and_never_retracts(seed):
    """Random texts built from every family's markers, split at random points, for every
    family: same final events as the whole parse, content only ever grows, no exception."""
    import random

    rng = random.Random(seed)
    names = family_names()
    for _ in range(600):
        text = "".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(1, 12)))
        parser = family_named(rng.choice(names))
        starts = rng.random() < 0.2
        expected = whole_events(parser, text, starts_in_reasoning=starts)
        final = fold_events(expected).content
        cuts = sorted(rng.sample(range(len(text) + 1), min(len(text) + 1, rng.randint(1, 6))))
        sp = parser.stream(fixed_ids(), starts_in_reasoning=starts)
        events = []
        for a, b in zip([0] + cuts, cuts + [len(text)]):
            events += sp.feed(text[a:b])
            assert final.startswith(fold_events(events).content), (parser.name, text)
        assert merged(events + sp.finish()) == expected, (parser.name, text, cuts)
