"""Matchers: each finds one kind of tool-call region in a reply buffer and decides it.

A matcher never decides early: match() answers None ("need more text") whenever more
text could still change its verdict, which is what makes streamed == non-streamed.
"""

from __future__ import annotations

from dataclasses import dataclass

from edge_infer.chat.families.jsonscan import calls_from_text, json_end

Calls = list  # list[tuple[name, arguments_json]]


@dataclass(frozen=True)
class Done:
    end: int          # buffer index just past the call region
    calls: Calls      # [(name, arguments_json), ...]


@dataclass(frozen=True)
class Fail:
    end: int          # the region [0, end) turned out to be plain text (end > 0)


def partial_suffix(buf: str, markers) -> int:
    """Length of the longest suffix of buf that is a proper prefix of a marker."""
    best = 0
    for m in markers:
        for n in range(min(len(m) - 1, len(buf)), best, -1):
            if buf.endswith(m[:n]):
                best = n
                break
    return best


class Matcher:
    """Base: a region that opens with one of `markers`."""

    markers: tuple[str, ...] = ()

    def find(self, buf: str, at_start: bool) -> int:
        hits = [i for i in (buf.find(m) for m in self.markers) if i >= 0]
        return min(hits, default=-1)

    def hold(self, buf: str, at_start: bool) -> int:
        return partial_suffix(buf, self.markers)

    def match(self, buf: str, final: bool):  # buf starts at the region's opening
        raise NotImplementedError

    def opener(self, buf: str) -> str:
        return next((m for m in self.markers if buf.startswith(m)), "")


class Tagged(Matcher):
    """<open> body <close>; the body is decoded by `decode(body) -> calls | None`.
    Without its close tag the region still counts at the end of the reply if the
    body decodes (a model stopped on the close tag)."""

    def __init__(self, open_tag: str, close_tag: str, decode=calls_from_text):
        self.markers = (open_tag,)
        self.close = close_tag
        self.decode = decode

    def match(self, buf: str, final: bool):
        start = len(self.opener(buf))
        j = buf.find(self.close, start)
        if j < 0:
            if not final:
                return None
            calls = self.decode(buf[start:])
            return Done(len(buf), calls) if calls else None
        end = j + len(self.close)
        calls = self.decode(buf[start:j])
        return Done(end, calls) if calls else Fail(end)


class FencedJson(Tagged):
    """A ```json fenced block holding a call object or an array of them."""

    def __init__(self):
        super().__init__("```json", "```")


class BareJson(Matcher):
    """A whole reply that is one JSON call object or an array of them (decided at the end)."""

    markers = ("{", "[")

    def find(self, buf: str, at_start: bool) -> int:
        if not at_start:
            return -1
        i = len(buf) - len(buf.lstrip())
        return i if i < len(buf) and buf[i] in "{[" else -1

    def hold(self, buf: str, at_start: bool) -> int:
        return len(buf) if at_start and not buf.strip() else 0

    def match(self, buf: str, final: bool):
        if not final:
            return None
        calls = calls_from_text(buf)
        return Done(len(buf), calls) if calls else Fail(len(buf))


class JsonObjectAfter(Matcher):
    """A JSON call object (or array) right after a marker; done when it closes."""

    def __init__(self, *markers: str, allow_array: bool = True):
        self.markers = markers
        self.allow_array = allow_array

    def match(self, buf: str, final: bool):
        i = len(self.opener(buf))
        while i < len(buf) and buf[i].isspace():
            i += 1
        if i >= len(buf):
            return None if not final else Fail(len(buf))
        if buf[i] not in ("{[" if self.allow_array else "{"):
            return Fail(i)
        end = json_end(buf, i)
        if end == -1:
            return None if not final else Fail(len(buf))
        if end == -2:
            return Fail(max(i, 1))
        calls = calls_from_text(buf[i:end])
        return Done(end, calls) if calls else Fail(end)
