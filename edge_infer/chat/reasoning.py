"""<think>...</think> blocks: reasoning apart from content, whole or streamed.

A template that opens <think> in the prompt makes the reply start inside reasoning
(starts_in_reasoning=True). Text that could still become a tag is held back; a
reasoning block the stream never closes stays reasoning. Whitespace right after a
tag is dropped.
"""

from __future__ import annotations

from edge_infer.chat.events import ContentDelta, ReasoningDelta
from edge_infer.chat.families.matchers import partial_suffix
from edge_infer.chat.holding import HoldingStream

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


def opens_in_reasoning(prompt_or_template: str | None) -> bool:
    """True when the rendered prompt ends inside an open <think> block."""
    if not prompt_or_template:
        return False
    tail = prompt_or_template.rstrip()
    return tail.endswith(THINK_OPEN)


class ReasoningSplitter(HoldingStream):
    def __init__(self, starts_in_reasoning: bool = False, open_tag: str = THINK_OPEN,
                 close_tag: str = THINK_CLOSE):
        super().__init__()
        self.open_tag, self.close_tag = open_tag, close_tag
        self.in_reasoning = starts_in_reasoning
        self._strip = starts_in_reasoning
        self._saw_tag = starts_in_reasoning
        self._content_out = False    # after content, <think> is plain text
        self._lead = ""              # leading whitespace, held: it may precede <think>

    @property
    def passthrough(self) -> bool:
        """Past the reply's head: content is out and nothing is held, so all text from now
        on is content as it comes (a caller on a hot path may skip feed())."""
        return self._content_out and not self.in_reasoning and not self._buf and not self._done

    def split(self, text: str) -> tuple[str | None, str]:
        """Whole text -> (reasoning or None when there was none, content)."""
        events = self.feed(text) + self.finish()
        reasoning = [e.text for e in events if isinstance(e, ReasoningDelta)]
        content = "".join(e.text for e in events if isinstance(e, ContentDelta))
        saw = bool(reasoning) or self._saw_tag
        return ("".join(reasoning) if saw else None), content

    def _release(self) -> list:
        lead, self._lead = self._lead, ""
        return [ContentDelta(lead)] if lead else []

    def _drain(self, final: bool) -> list:
        out = []
        while self._buf:
            if not self.in_reasoning and self._content_out:
                self._emit(self._buf, out)
                self._buf = ""
                return out
            tag = self.close_tag if self.in_reasoning else self.open_tag
            i = self._buf.find(tag)
            if i < 0:
                cut = len(self._buf) - (0 if final else partial_suffix(self._buf, (tag,)))
                self._emit(self._buf[:cut], out)
                self._buf = self._buf[cut:]
                return out
            self._emit(self._buf[:i], out)
            if not self.in_reasoning and self._content_out:
                self._buf = self._buf[i:]    # <think> after content is plain text
                continue
            self._lead = ""                  # whitespace before <think> is dropped
            self._buf = self._buf[i + len(tag):]
            self.in_reasoning = not self.in_reasoning
            self._saw_tag = True
            self._strip = True
        return out

    def _emit(self, text: str, out: list) -> None:
        if self._strip:
            text = text.lstrip()
        if not text:
            return
        self._strip = False
        if self.in_reasoning:
            out.append(ReasoningDelta(text))
            return
        if not self._content_out:
            if not text.strip():
                self._lead += text
                return
            text, self._lead = self._lead + text, ""
            self._content_out = True
        out.append(ContentDelta(text))
