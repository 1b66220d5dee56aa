"""Calls written under the engine's call grammar (a forced reply, or one whose trigger
switched the sampler to the call grammar, engine/postprocess.py): their syntax is known
to hold, so a call's name goes out as soon as it is complete and its arguments as they
arrive, instead of once the whole call has parsed. If the text leaves the syntax anyway
(a stop string or max_tokens cut it), the call ends there: what was sent stays sent
(OpenAI does the same at finish_reason "length") and the rest is content, except the call's
own closing or the next call's opening cut short, which are the calls' syntax, not text.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from edge_infer.chat.families.matchers import Fail, Matcher, partial_suffix
from edge_infer.chat.families.syntax import CallWrapper

WAIT, FAIL = -1, -2


def match_loose(buf: str, i: int, lit: str, final: bool) -> int:
    """Index just past `lit` in buf from i, whitespace matching any run of whitespace
    (also none); WAIT when buf ends inside it (and more may come), FAIL when it differs."""
    for piece in lit.split():
        while i < len(buf) and buf[i].isspace():
            i += 1
        got = buf[i:i + len(piece)]
        if got != piece[:len(got)]:
            return FAIL
        if len(got) < len(piece):
            return FAIL if final else WAIT
        i += len(piece)
    return i


@dataclass
class Progress:
    consumed: int                               # buffer chars decided (and dropped)
    items: list = field(default_factory=list)   # ("start", name) | ("args", fragment)
    done: bool = False                          # the region is over


class _ValueScan:
    """Where one JSON value ends, fed in pieces (strings and escapes respected)."""

    def __init__(self):
        self.kind = ""          # "" (not begun), "nest", "str" or "scalar"
        self.depth, self.in_str, self.esc = 0, False, False

    def feed(self, buf: str, i: int) -> tuple[int, int, bool]:
        """(start of the value's text in this piece, end, complete)."""
        if not self.kind:
            while i < len(buf) and buf[i].isspace():
                i += 1
            if i == len(buf):
                return i, i, False
            c = buf[i]
            self.kind = "nest" if c in "{[" else "str" if c == '"' else "scalar"
        start = i
        for j in range(i, len(buf)):
            c = buf[j]
            if self.in_str:
                if self.esc:
                    self.esc = False
                elif c == "\\":
                    self.esc = True
                elif c == '"':
                    self.in_str = False
                    if self.kind == "str":
                        return start, j + 1, True
            elif self.kind == "scalar":
                if not (c.isalnum() or c in "+-."):
                    return start, j, True
            elif c == '"':
                self.in_str = True
            elif c in "{[":
                self.depth += 1
            elif c in "}]":
                self.depth -= 1
                if self.depth == 0:
                    return start, j + 1, True
        return start, len(buf), False


class ConstrainedCalls(Matcher):
    """One region of grammar-written calls in a family's CallWrapper syntax, read as it comes."""

    incremental = True

    def __init__(self, wrapper: CallWrapper):
        self.w = wrapper
        self.markers = (wrapper.trigger,)
        self._reset()

    def _reset(self) -> None:
        self.state, self.started, self.scan = "open", False, _ValueScan()

    def hold(self, buf: str, at_start: bool) -> int:
        return partial_suffix(buf, self.markers)

    def match(self, buf: str, final: bool):  # not used: ToolCallStream calls advance()
        raise NotImplementedError

    def advance(self, buf: str, final: bool):
        """Progress over buf (which starts where the last call left off), or Fail when the
        region turned out not to be a call before any of it was sent."""
        i, items = 0, []
        while True:
            if self.state in ("open", "after"):
                # a call's head: the region's opening, or (after a call) a separator and the
                # next call's opening, up to the end of its name; nothing is taken before that
                lead = self.w.list_open + self.w.call_open if self.state == "open" \
                    else self.w.separator + self.w.call_open
                j = match_loose(buf, i, lead, final)
                head = self._head(buf, j, final) if j >= 0 else j
                if head == WAIT and not final:
                    return Progress(i, items)
                if isinstance(head, tuple):
                    items.append(("start", head[0]))
                    self.started, self.state, self.scan, i = True, "args", _ValueScan(), head[1]
                    continue
                if self.state == "open":
                    self._reset()
                    return Fail(len(self.w.trigger) if buf.startswith(self.w.trigger) else 1)
                if final and self._cut_head(buf, i, lead):
                    return self._end(len(buf), items)  # the next call, cut before its name: not content
                k = match_loose(buf, i, self.w.list_close, final) if self.w.list_close else FAIL
                if k == WAIT:
                    return Progress(i, items)
                return self._end(max(k, i), items)
            elif self.state == "args":
                start, end, complete = self.scan.feed(buf, i)
                if end > start:
                    items.append(("args", buf[start:end]))
                i = end
                if not complete:
                    return self._end(i, items) if final else Progress(i, items)
                self.state = "close"
            else:  # "close": the call's closing text
                j = match_loose(buf, i, self.w.call_close, final)
                if j == WAIT:
                    return Progress(i, items)
                if j == FAIL:
                    if final and match_loose(buf, i, self.w.call_close, False) == WAIT:
                        return self._end(len(buf), items)  # its own closing, cut short: not content
                    return self._end(i, items)
                i, self.state = j, "after"

    def _cut_head(self, buf: str, i: int, lead: str) -> bool:
        """buf[i:] is the start of another call's head (its opening, or its name) cut short."""
        j = match_loose(buf, i, lead, False)
        return j == WAIT or (j >= 0 and self._head(buf, j, False) == WAIT)

    def _head(self, buf: str, j: int, final: bool):
        """(name, index past name_close) for a name starting at buf[j], or WAIT / FAIL."""
        q = buf.find('"', j)
        if q < 0:
            return FAIL if final else WAIT
        k = match_loose(buf, q, self.w.name_close, final)
        return (buf[j:q], k) if k >= 0 else k

    def _end(self, i: int, items: list) -> Progress:
        self._reset()
        return Progress(i, items, done=True)
