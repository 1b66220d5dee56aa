"""Text out: UTF-8 characters split across tokens, stop strings across tokens, EOG."""

import pytest

from edge_infer.engine import Request, SamplingParams, TokenEvent
from edge_infer.engine.text import StopMatcher, Utf8Stream

MULTIBYTE = "Grüße aus Köln: 日本語 and 🎉🦀 café"


def test_utf8_stream_waits_for_the_last_byte():
    s = Utf8Stream()
    data = "🎉".encode()
    assert s.feed(data[:1]) == "" and s.feed(data[1:3]) == ""
    assert s.feed(data[3:]) == "🎉"


@pytest.mark.parametrize("pieces,stops,expected,stopped", [
    (["Hello wor", "ld, the E", "ND is near"], ["the END"], "Hello world, ", True),
    (["abc", "de"], ["xyz"], "abcde", False),
    (["ab", "c<", "|im", "_end|>tail"], ["<|im_end|>"], "abc", True),
    (["x<", "y"], ["<|"], "x<y", False),
])
def test_stop_matcher(pieces, stops, expected, stopped):
    m = StopMatcher(stops)
    out, hit = "", False
    for p in pieces:
        text, hit = m.feed(p)
        out += text
        if hit:
            break
    if not hit:
        out += m.flush()
    assert (out, hit) == (expected, stopped)


def test_multibyte_characters_split_across_tokens(smol):
    tokens = smol.model.tokenize(MULTIBYTE, add_special=False)
    pieces = [smol.model.token_to_bytes(t) for t in tokens]
    # The premise: some token is not valid UTF-8 on its own.
    def valid(b):
        try:
            b.decode("utf-8")
            return True
        except UnicodeDecodeError:
            return False
    assert not all(valid(p) for p in pieces)
    stream = smol.submit(Request(prompt="Say it:", forced_tokens=tokens))
    texts = [e.text for e in stream if isinstance(e, TokenEvent)] + [stream.finished.text]
    assert "".join(texts) == MULTIBYTE
    assert all("\ufffd" not in t for t in texts)


def test_stop_string_spanning_tokens(smol):
    text = "Hello world, the END is near and more text follows"
    tokens = smol.model.tokenize(text, add_special=False)
    stop = "the END"
    # The premise: no single token holds the whole stop string.
    assert not any(stop in smol.model.token_to_bytes(t).decode("utf-8", "replace") for t in tokens)
    c = smol.generate(Request(prompt="x", forced_tokens=tokens, sampling=SamplingParams(stop=(stop,))))
    assert c.text == "Hello world, "
    assert c.finish_reason == "stop"
    assert len(c.tokens) < len(tokens)  # generation ended at the stop, not at the end


def test_stop_string_on_sampled_output(smol):
    greedy = SamplingParams(temperature=0, max_tokens=40)
    full = smol.generate(Request(prompt="The alphabet starts with A, B, C,", sampling=greedy)).text
    assert len(full) > 12
    stop = full[6:12]
    cut = smol.generate(Request(prompt="The alphabet starts with A, B, C,",
                                sampling=SamplingParams(temperature=0, max_tokens=40, stop=(stop,))))
    assert cut.finish_reason == "stop"
    assert cut.text == full[:full.index(stop)]


def test_chat_reply_ends_at_end_of_generation_token(smol):
    c = smol.generate(Request(messages=[{"role": "user", "content": "Say hi."}],
                              sampling=SamplingParams(temperature=0, max_tokens=200)))
    assert c.finish_reason == "stop"
    assert "<|im_end|>" not in c.text and c.text.strip()
