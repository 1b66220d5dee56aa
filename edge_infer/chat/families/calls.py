"""The incremental tool-call parser: text deltas in, content / tool-call events out.

Text that could still open a call is held back, never emitted and then retracted; a
call is emitted once its region is decided. At finish() whatever is still held (a
partial or malformed call) comes out as content. Whitespace right before a call and
right after one is dropped, as is trailing whitespace of a reply that made calls.
Calls the engine's grammar writes are read incrementally (constrain(), constrained.py):
their name goes out once complete and their arguments as they arrive.
"""

from __future__ import annotations

from edge_infer.chat.events import (
    ContentDelta, IdFactory, ToolCallArgsDelta, ToolCallStart, new_call_id,
)
from edge_infer.chat.families.matchers import Done, Fail, Matcher
from edge_infer.chat.holding import HoldingStream


class ToolCallStream(HoldingStream):
    """Content-only text in (reasoning already split off), events out."""

    def __init__(self, matchers: list[Matcher], id_factory: IdFactory = new_call_id):
        super().__init__()
        self.matchers = matchers
        self.id_factory = id_factory
        self._pending: Matcher | None = None
        self._ws = ""                # trailing whitespace of content, held
        self._emitted = False        # any content or call out yet
        self._after_call = False
        self.n_calls = 0

    def constrain(self, matcher: Matcher) -> list:
        """From now on calls that open with matcher's marker are grammar-written: read them
        with `matcher` (an incremental one). The engine's call opened at the marker's last
        occurrence in what is held: a region still pending before it (a reply that began as
        a bare JSON value, say) ends there and is decided now (its events are returned)."""
        self.matchers = [matcher] + [m for m in self.matchers if m is not matcher]
        pending = self._pending
        if pending is None or getattr(pending, "incremental", False):
            return []
        at = max(self._buf.rfind(m) for m in matcher.markers)
        if at < 0:
            return []
        out: list = []
        if at > 0:
            rest, self._buf = self._buf[at:], self._buf[:at]
            out = self._drain(final=True)
            if self._buf:  # a region that neither parsed nor failed (an unclosed tag) is content
                out += self._content(self._buf)
            self._buf = rest
        self._pending = matcher
        return out

    # --- internals -------------------------------------------------------------

    def _release(self) -> list:
        out = []
        if self._buf:
            out += self._content(self._buf)
            self._buf = ""
        if self._ws and not self.n_calls:
            out.append(ContentDelta(self._ws))
        self._ws = ""
        return out

    def _drain(self, final: bool) -> list:
        out: list = []
        while self._buf:
            if self._pending is None:
                at_start = not self._emitted
                found = [(m.find(self._buf, at_start), k) for k, m in enumerate(self.matchers)]
                found = [(i, k) for i, k in found if i >= 0]
                if not found:
                    hold = 0 if final else max((m.hold(self._buf, at_start) for m in self.matchers),
                                               default=0)
                    cut = len(self._buf) - hold
                    out += self._content(self._buf[:cut])
                    self._buf = self._buf[cut:]
                    return out
                i, k = min(found)
                # a marker still arriving at or before i, from a matcher that would win, waits
                waits = [] if final else [
                    len(self._buf) - h for k2, m in enumerate(self.matchers)
                    if (h := m.hold(self._buf, at_start)) and
                    (len(self._buf) - h < i or (len(self._buf) - h == i and k2 < k))]
                if waits:
                    cut = min(waits)
                    out += self._content(self._buf[:cut])
                    self._buf = self._buf[cut:]
                    return out
                out += self._content(self._buf[:i])
                self._buf = self._buf[i:]
                self._pending = self.matchers[k]
            if getattr(self._pending, "incremental", False):
                verdict = self._pending.advance(self._buf, final)
                if not isinstance(verdict, Fail):
                    self._buf = self._buf[verdict.consumed:]
                    out += self._progress(verdict.items)
                    if not verdict.done:
                        return out
                    self._pending, self._after_call = None, True
                    continue
            else:
                verdict = self._pending.match(self._buf, final)
            if verdict is None:
                return out
            self._pending = None
            if isinstance(verdict, Done):
                self._buf = self._buf[verdict.end:]
                out += self._calls(verdict.calls)
            else:
                assert isinstance(verdict, Fail) and verdict.end > 0
                text, self._buf = self._buf[:verdict.end], self._buf[verdict.end:]
                out += self._content(text)
        return out

    def _content(self, text: str) -> list:
        if self._after_call:
            text = text.lstrip()
        if not text:
            return []
        self._after_call = False
        body = text.rstrip()
        text_ws = text[len(body):]
        if not body:
            self._ws += text_ws
            return []
        self._emitted = True
        out = [ContentDelta(self._ws + body)]
        self._ws = text_ws
        return out

    def _progress(self, items) -> list:
        out = []
        for kind, value in items:
            if kind == "start":
                index = self.n_calls
                self.n_calls += 1
                self._ws, self._emitted = "", True
                out.append(ToolCallStart(index, self.id_factory(), value))
            else:
                out.append(ToolCallArgsDelta(self.n_calls - 1, value))
        return out

    def _calls(self, calls) -> list:
        out = []
        self._ws = ""
        for name, args in calls:
            index = self.n_calls
            self.n_calls += 1
            out.append(ToolCallStart(index, self.id_factory(), name))
            out.append(ToolCallArgsDelta(index, args))
        self._emitted = True
        self._after_call = True
        return out
