"""Client text stays text in a chat prompt (issue 47, item 3).

A message that spells a control token's text (ChatML's "<|im_start|>", Gemma's
"<start_of_turn>", Llama 3's "<|eot_id|>", ...) must not become that token: it would forge
a turn or a tool result. Only the chat template's own text may produce control tokens.

How: every occurrence of a control text in what the client sent (message contents and their
text parts, tool calls' names and arguments, tool results, tools, template variables) is
swapped for a placeholder before the template renders; the rendered prompt is then cut at
the template's own control tokens, and a stretch between two of them that holds a
placeholder gets its text back and is marked literal: the engine tokenizes it with special
parsing off. Cutting only where the template put a control token keeps every other
stretch exactly as llama.cpp's own tokenizer cuts the whole text (it splits at control
tokens too), and a prompt whose inputs spell no control text is not touched at all: its
tokens are what they always were (the prompt cache and greedy replies depend on that).
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from edge_infer.chat.tool_prompt import read_arguments


@dataclass(frozen=True)
class Part:
    text: str
    literal: bool  # client text that spells a control token: tokenize it with special parsing off


class ControlTexts:
    """The texts of a vocabulary's control tokens, found leftmost-longest in a text.
    (A regex alternation of thousands of texts is slow; candidates start at a few
    characters, and the texts come in a few lengths.)"""

    def __init__(self, texts: Iterable[str]):
        self.texts = frozenset(t for t in texts if t)
        self._lengths = sorted({len(t) for t in self.texts}, reverse=True)
        firsts = "".join(sorted({t[0] for t in self.texts}))
        self._starts = re.compile(f"[{re.escape(firsts)}]") if firsts else None

    def spans(self, text: str) -> Iterator[tuple[int, int]]:
        if self._starts is None:
            return
        i = 0
        while (m := self._starts.search(text, i)) is not None:
            i = m.start()
            for n in self._lengths:
                if text[i:i + n] in self.texts:
                    yield i, i + n
                    i += n
                    break
            else:
                i += 1


def text_of(content: list) -> str:
    """OpenAI content parts as the prompt's text: the text parts, joined."""
    return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")


class Masked:
    """Inputs with each control text swapped for a placeholder, and the way back.
    `found`: the control texts the inputs spell (none: render and tokenize them as ever)."""

    def __init__(self, controls: ControlTexts, messages: list[dict], tools: list[dict] | None,
                 variables: dict | None):
        self.controls = controls
        seen = json.dumps([messages, tools, variables], default=str)
        while (nonce := secrets.token_hex(8)) in seen:  # never a string the client sent
            pass
        # Lower-case letters and digits: survives JSON (tojson), |trim and |lower in templates.
        self._mark = f"lit{nonce}x"
        self.found: list[str] = []  # placeholder number -> the control text it stands for
        self._placeholder = re.compile(re.escape(self._mark) + r"(\d+)y")
        self.messages = [self._mask_message(m) if isinstance(m, dict) else m for m in messages]
        self.tools = self._mask(tools)
        self.variables = self._mask(variables)

    def _mask_message(self, message: dict) -> dict:
        out = {}
        for key, value in message.items():
            if key == "role":
                out[key] = value
            elif key == "content" and isinstance(value, list):  # parts joined first: two may spell one token
                out[key] = self._mask(text_of(value))
            elif key == "tool_calls" and isinstance(value, list):
                out[key] = [self._mask_call(c) for c in value]
            else:
                out[key] = self._mask(value)
        return out

    def _mask_call(self, call: Any) -> Any:
        """Arguments as JSON text are read first, as the template will read them: JSON may
        spell a control token in escapes ("\\u003c|im_start|>") that become it when read."""
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("arguments"), str):
            return self._mask(call)
        return self._mask({**call, "function": {**fn, "arguments": read_arguments(fn["arguments"])}})

    def _mask(self, value: Any) -> Any:
        if isinstance(value, str):
            return self._mask_text(value)
        if isinstance(value, dict):
            return {self._mask(k): self._mask(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self._mask(v) for v in value]
        return value

    def _mask_text(self, text: str) -> str:
        out, at = [], 0
        for start, end in self.controls.spans(text):
            spelled = text[start:end]
            if spelled not in self.found:
                self.found.append(spelled)
            out += [text[at:start], f"{self._mark}{self.found.index(spelled)}y"]
            at = end
        return "".join(out) + text[at:] if out else text

    def parts(self, rendered: str) -> list[Part]:
        """The rendered prompt cut into template parts and literal parts (see the module doc)."""
        # Segments: (text, kind) with kind "control" (the template's own control token),
        # "text" (the template's text, or client text without control text) or "literal".
        segments: list[tuple[str, str]] = []
        at = 0
        for m in self._placeholder.finditer(rendered):
            segments += self._template_segments(rendered[at:m.start()])
            segments.append((self.found[int(m.group(1))], "literal"))
            at = m.end()
        segments += self._template_segments(rendered[at:])
        parts: list[Part] = []
        run: list[tuple[str, str]] = []  # text and literal segments since the last control token

        def flush() -> None:
            literal = any(kind == "literal" for _, kind in run)
            _append(parts, Part("".join(text for text, _ in run), literal))
            run.clear()

        for text, kind in segments:
            if kind == "control":
                flush()
                _append(parts, Part(text, False))
            else:
                run.append((text, kind))
        flush()
        return parts

    def _template_segments(self, text: str) -> list[tuple[str, str]]:
        out, at = [], 0
        for start, end in self.controls.spans(text):
            out += [(text[at:start], "text"), (text[start:end], "control")]
            at = end
        return out + [(text[at:], "text")]


def _append(parts: list[Part], part: Part) -> None:
    """Adjacent parts of one kind join (one tokenize call each, as few as possible)."""
    if not part.text:
        return
    if parts and parts[-1].literal == part.literal:
        parts[-1] = Part(parts[-1].text + part.text, part.literal)
    else:
        parts.append(part)
