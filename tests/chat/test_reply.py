"""Typed reply events (chat/reply.py): one reader for every face; the whole reply is the fold
of the streamed events, so streamed == whole by construction. Pure Python, no model."""

from __future__ import annotations

import json
import random
from types import SimpleNamespace

import pytest

from edge_infer.chat.events import ContentDelta, ReasoningDelta, ToolCallArgsDelta, ToolCallStart
from edge_infer.chat.families import family_named
from edge_infer.chat.reply import ReplyEnd, ReplyReader, ToolCallDone, Usage, fold
from tests.chat.test_families import HERMES_PARALLEL, HERMES_SINGLE, fixed_ids

STATS = SimpleNamespace(prompt_tokens=12, generated_tokens=30, cached_tokens=4)


def read(reader: ReplyReader, pieces: list[str], reason: str = "stop", call_began_at: int | None = None):
    events = []
    for n, text in enumerate(pieces):
        events += reader.token(text, call_began=n == call_began_at)
    return events + reader.end(reason, "", STATS)


def cuts(text: str, rng: random.Random) -> list[str]:
    marks = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, rng.randint(1, 12))))
    return [text[a:b] for a, b in zip([0] + marks, marks + [len(text)])]


def test_a_plain_reply_is_content_then_its_end_with_usage():
    events = read(ReplyReader(None, reasoning="none"), ["Hel", "lo", ""], reason="length")
    assert events == [ContentDelta("Hel"), ContentDelta("lo"),
                      ReplyEnd("length", Usage(12, 30, 4), None, STATS)]
    reply = fold(events)
    assert (reply.content, reply.reasoning, reply.tool_calls, reply.finish_reason) == ("Hello", None, [], "length")
    assert reply.usage == Usage(12, 30, 4)


def test_a_stop_after_calling_tools_ends_as_tool_calls_decided_once():
    events = read(ReplyReader(family_named("hermes"), id_factory=fixed_ids()), [HERMES_SINGLE])
    assert isinstance(events[-1], ReplyEnd) and events[-1].finish_reason == "tool_calls"
    assert fold(events).content is None  # a reply that only calls: content null (OpenAI's shape)
    # A call cut by max_tokens keeps its own reason.
    events = read(ReplyReader(family_named("hermes"), id_factory=fixed_ids()), [HERMES_SINGLE], reason="length")
    assert events[-1].finish_reason == "length"


def test_each_call_is_done_once_its_arguments_are_whole_in_order():
    events = read(ReplyReader(family_named("hermes"), id_factory=fixed_ids()), [HERMES_PARALLEL])
    kinds = [type(e).__name__ for e in events if not isinstance(e, ContentDelta)]
    assert kinds == ["ToolCallStart", "ToolCallArgsDelta", "ToolCallDone",
                     "ToolCallStart", "ToolCallArgsDelta", "ToolCallDone", "ReplyEnd"]
    done = [e for e in events if isinstance(e, ToolCallDone)]
    assert [(d.index, d.call.name, d.arguments()) for d in done] == [
        (0, "get_weather", {"city": "Tokyo"}), (1, "get_time", {"tz": "Asia/Tokyo"})]
    assert [c.id for c in fold(events).tool_calls] == ["call_" + "1".zfill(24), "call_" + "2".zfill(24)]


def test_a_grammar_written_call_is_done_when_its_object_closes():
    text = '<tool_call>\n{"name": "f", "arguments": {"a": [1, 2], "b": "}"}}\n</tool_call>'
    pieces = [text[i:i + 3] for i in range(0, len(text), 3)]
    reader = ReplyReader(family_named("hermes"), constrained=True, id_factory=fixed_ids())
    events, done_at = [], None
    for n, piece in enumerate(pieces):
        got = reader.token(piece)
        if done_at is None and any(isinstance(e, ToolCallDone) for e in got):
            done_at = n
        events += got
    assert any(isinstance(e, ToolCallArgsDelta) for e in events)  # streamed as they came
    assert done_at is not None and done_at < len(pieces) - 1  # done before the reply's end
    events += reader.end("stop", "", STATS)
    assert fold(events).tool_calls[0].arguments_json == '{"a": [1, 2], "b": "}"}'


def test_a_call_cut_short_is_done_at_the_end_with_what_it_had():
    text = '<tool_call>\n{"name": "f", "arguments": {"a": 1'
    reader = ReplyReader(family_named("hermes"), constrained=True, id_factory=fixed_ids())
    events = read(reader, [text], reason="length")
    done = [e for e in events if isinstance(e, ToolCallDone)]
    assert len(done) == 1 and done[0].arguments() == {}  # not an object: {} (Ollama's shape)


@pytest.mark.parametrize("reasoning, expect", [("auto", ("Paris.", "Capital?")),
                                               ("drop", ("Paris.", None))])
def test_reasoning_is_split_off_or_dropped(reasoning, expect):
    events = read(ReplyReader(None, reasoning=reasoning), ["<think>Capi", "tal?</think>", "Paris."])
    reply = fold(events)
    assert (reply.content, reply.reasoning) == expect
    assert (not any(isinstance(e, ReasoningDelta) for e in events)) == (reasoning == "drop")


def test_a_reply_that_opens_in_reasoning():
    reply = fold(read(ReplyReader(None, starts_in_reasoning=True), ["Hmm.", "</think>", "Yes."]))
    assert (reply.reasoning, reply.content) == ("Hmm.", "Yes.")


def test_streamed_equals_whole_however_the_tokens_fall():
    rng = random.Random(7)
    family = family_named("hermes")
    text = "<think>plan</think>" + HERMES_PARALLEL
    whole = fold(read(ReplyReader(family, id_factory=fixed_ids()), [text]))
    for _ in range(200):
        streamed = fold(read(ReplyReader(family, id_factory=fixed_ids()), cuts(text, rng)))
        assert streamed == whole
    assert whole.reasoning == "plan" and len(whole.tool_calls) == 2
    assert json.loads(whole.tool_calls[0].arguments_json) == {"city": "Tokyo"}


def test_calls_start_before_their_arguments_and_are_done_after():
    events = read(ReplyReader(family_named("hermes"), id_factory=fixed_ids()), [HERMES_SINGLE])
    order = [type(e) for e in events if type(e) in (ToolCallStart, ToolCallArgsDelta, ToolCallDone)]
    assert order == [ToolCallStart, ToolCallArgsDelta, ToolCallDone]
    assert fold(events).tool_calls[0].name == "get_weather"


CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'


def test_a_repeated_call_ends_the_calls_instead_of_coming_back_twice():
    """Small models write the same call again until max_tokens: the repeat (and the cut one
    after it) is not the reply's, and the reply ends as tool_calls, not length."""
    text = CALL + CALL + '<tool_call>\n{"name": "get_weather", "argu'
    for cut in ([text], [text[i:i + 5] for i in range(0, len(text), 5)]):
        reader = ReplyReader(family_named("hermes"), id_factory=fixed_ids())
        events = read(reader, cut, reason="length")
        reply = fold(events)
        assert [(c.name, json.loads(c.arguments_json)) for c in reply.tool_calls] == [("get_weather", {"city": "Paris"})]
        assert reply.finish_reason == "tool_calls" and reader.calls_ended
        assert sum(isinstance(e, ToolCallStart) for e in events) == 1


def test_a_cut_repeat_is_dropped_and_a_different_call_is_kept():
    # A forced call (the call grammar writes the reply): the cut one's name is out, its arguments not.
    reader = ReplyReader(family_named("hermes"), constrained=True, id_factory=fixed_ids())
    cut = read(reader, [CALL + '<tool_call>\n{"name": "get_weather", "arguments": {"ci'], reason="length")
    assert len(fold(cut).tool_calls) == 1 and fold(cut).finish_reason == "tool_calls"
    other = CALL.replace("Paris", "Oslo")
    reply = fold(read(ReplyReader(family_named("hermes"), id_factory=fixed_ids()), [CALL + other]))
    assert [json.loads(c.arguments_json)["city"] for c in reply.tool_calls] == ["Paris", "Oslo"]


def test_a_later_call_is_held_until_whole_the_first_streams_as_it_comes():
    text = '<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>\n<tool_call>\n{"name": "g", "arguments": {"b": 2}}\n</tool_call>'
    reader = ReplyReader(family_named("hermes"), constrained=True, id_factory=fixed_ids())
    seen = []
    for i in range(0, len(text), 3):
        got = reader.token(text[i:i + 3])
        seen.append([type(e).__name__ for e in got])
    flat = [k for step in seen for k in step]
    first_done = flat.index("ToolCallDone")
    assert flat.index("ToolCallArgsDelta") < first_done  # the first call's arguments stream
    second = [step for step in seen if "ToolCallStart" in step and step.index("ToolCallStart") > -1][-1]
    assert second[-1] == "ToolCallDone" and "ToolCallArgsDelta" in second  # the second comes whole
