"""Llama 3.x: a JSON call {"name": ..., "parameters": {...}} (also {"type": "function",
"name": ...}), bare or after <|python_tag|>; after the tag also the built-in tools'
python-call style `brave_search.call(query="...")`."""

from __future__ import annotations

import re

from edge_infer.chat.families.generic import generic_matchers
from edge_infer.chat.families.jsonscan import is_prefix_of_any
from edge_infer.chat.families.matchers import Done, Fail, JsonObjectAfter, Matcher
from edge_infer.chat.families.pythonic import calls_from_python
from edge_infer.chat.families.family import Family
from edge_infer.chat.families.syntax import LLAMA3

PYTHON_TAG = "<|python_tag|>"
_KEYS = ('"name"', '"type"', '"function"')
_OPEN = re.compile(r'\{\s*"(?:name|type|function)"')


class JsonCallObject(JsonObjectAfter):
    """A bare JSON call object anywhere in the reply: `{` + ws + "name"/"type"/"function"."""

    def __init__(self):
        super().__init__("{", allow_array=False)

    def find(self, buf: str, at_start: bool) -> int:
        m = _OPEN.search(buf)
        return m.start() if m else -1

    def hold(self, buf: str, at_start: bool) -> int:
        i = buf.rfind("{", max(0, len(buf) - 64))
        while i >= 0:
            rest = buf[i + 1:].lstrip()
            if is_prefix_of_any(rest, _KEYS):
                return len(buf) - i
            i = buf.rfind("{", max(0, len(buf) - 64), i)
        return 0

    def match(self, buf: str, final: bool):
        return super().match(buf, final) if buf.startswith("{") else Fail(1)

    def opener(self, buf: str) -> str:
        return ""


class PythonTag(Matcher):
    """<|python_tag|> then a JSON call (done when it closes) or python calls (at the end)."""

    markers = (PYTHON_TAG,)

    def __init__(self):
        self._json = JsonObjectAfter(PYTHON_TAG)

    def match(self, buf: str, final: bool):
        body = buf[len(PYTHON_TAG):].lstrip()
        if not body:
            return None if not final else Fail(len(buf))
        if body[0] in "{[":
            return self._json.match(buf, final)
        if not final:
            return None
        calls = calls_from_python(body.replace("<|eom_id|>", ""))
        return Done(len(buf), calls) if calls else Fail(len(buf))


def _is_llama3(tmpl: str, arch: str) -> bool:
    return PYTHON_TAG in tmpl or ("<|start_header_id|>" in tmpl and
                                  ("ipython" in tmpl or "tools" in tmpl))


FAMILIES = (Family("llama3", detect=_is_llama3,
                   matchers=lambda: [PythonTag(), JsonCallObject()] + generic_matchers(),
                   triggers=(PYTHON_TAG, '{"name"', '{"type"'), wrapper=LLAMA3, priority=30),)
