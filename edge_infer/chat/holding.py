"""The skeleton the reply's streaming splitters share (reasoning.py, families/calls.py):
text in, events out, where text that could still become markup is held back until the
next piece decides it, and finish() lets out what is still held."""

from __future__ import annotations


class HoldingStream:
    """feed() appends to the held text and drains what is decided; finish() drains the rest
    as final, then whatever the splitter still holds (_release); after that both are no-ops."""

    def __init__(self) -> None:
        self._buf = ""
        self._done = False

    def feed(self, text: str) -> list:
        if self._done or not text:
            return []
        self._buf += text
        return self._drain(final=False)

    def finish(self) -> list:
        if self._done:
            return []
        out = self._drain(final=True)
        out += self._release()
        self._done = True
        return out

    def _drain(self, final: bool) -> list:
        """Events for the held text that is decided (all of it when final)."""
        raise NotImplementedError

    def _release(self) -> list:
        """Events for what the final drain left held (whitespace, a malformed region)."""
        return []
