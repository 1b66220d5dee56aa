"""Text out of tokens: incremental UTF-8 decoding and stop strings that span tokens."""

from __future__ import annotations

import codecs


class Utf8Stream:
    """Bytes in, text out; a character split across tokens waits for its last byte."""

    def __init__(self):
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, data: bytes) -> str:
        return self._decoder.decode(data)

    def flush(self) -> str:
        return self._decoder.decode(b"", final=True)


class StopMatcher:
    """Finds stop strings in streamed text, holding back only what could still become one.

    feed() returns (text safe to emit, stopped). Text after a stop string is dropped.
    """

    def __init__(self, stops: tuple[str, ...] | list[str]):
        self.stops = tuple(s for s in stops if s)
        self._pending = ""
        self.matched: str | None = None  # the stop string that ended the text, once one has

    def feed(self, text: str) -> tuple[str, bool]:
        if not self.stops:
            return text, False
        self._pending += text
        hit = min((i for i in (self._pending.find(s) for s in self.stops) if i >= 0), default=-1)
        if hit >= 0:
            self.matched = next(s for s in self.stops if self._pending.find(s) == hit)
            out, self._pending = self._pending[:hit], ""
            return out, True
        hold = self._longest_stop_prefix_suffix(self._pending)
        cut = len(self._pending) - hold
        out, self._pending = self._pending[:cut], self._pending[cut:]
        return out, False

    def flush(self) -> str:
        out, self._pending = self._pending, ""
        return out

    def _longest_stop_prefix_suffix(self, text: str) -> int:
        best = 0
        for stop in self.stops:
            for n in range(min(len(stop) - 1, len(text)), best, -1):
                if text.endswith(stop[:n]):
                    best = n
                    break
        return best
