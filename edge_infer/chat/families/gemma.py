"""Gemma: FunctionGemma's <start_function_call>call:NAME{key:<escape>text<escape>,n:1}
<end_function_call> (several for parallel calls), and Gemma 3's ```tool_code fenced
python calls `print(default_api.fn(a=1))`; ```json fences and bare JSON as fallback."""

from __future__ import annotations

import re

from edge_infer.chat.families.generic import generic_matchers
from edge_infer.chat.families.jsonscan import dumps
from edge_infer.chat.families.matchers import Tagged
from edge_infer.chat.families.pythonic import calls_from_python
from edge_infer.chat.families.family import Family
from edge_infer.chat.families.syntax import FUNCTION_GEMMA, GEMMA_TOOL_CODE

START, END, ESC = "<start_function_call>", "<end_function_call>", "<escape>"
TOOL_CODE = "```tool_code"
_KEY = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_.\-]*)\s*:")
_SCALAR = re.compile(r"\s*([^,}\]\s]+)")
_CALL = re.compile(r"\s*call:([A-Za-z0-9_.\-]+)\s*\{")


class _Bad(Exception):
    pass


def _value(s: str, i: int):
    while i < len(s) and s[i].isspace():
        i += 1
    if s.startswith(ESC, i):
        j = s.find(ESC, i + len(ESC))
        if j < 0:
            raise _Bad
        return s[i + len(ESC):j], j + len(ESC)
    if s.startswith("{", i):
        return _object(s, i + 1)
    if s.startswith("[", i):
        items, i = [], i + 1
        while True:
            while i < len(s) and s[i].isspace():
                i += 1
            if s.startswith("]", i):
                return items, i + 1
            v, i = _value(s, i)
            items.append(v)
            i = _sep(s, i, "]")
            if s.startswith("]", i):
                return items, i + 1
            i += 1
    m = _SCALAR.match(s, i)
    if not m:
        raise _Bad
    word = m.group(1)
    literals = {"true": True, "false": False, "null": None}
    if word in literals:
        return literals[word], m.end()
    try:
        return (float(word) if any(c in word for c in ".eE") else int(word)), m.end()
    except ValueError:
        return word, m.end()               # an unquoted word: keep it as text


def _sep(s: str, i: int, close: str) -> int:
    while i < len(s) and s[i].isspace():
        i += 1
    if i < len(s) and (s[i] == "," or s[i] == close):
        return i
    raise _Bad


def _object(s: str, i: int):
    obj = {}
    while True:
        while i < len(s) and s[i].isspace():
            i += 1
        if s.startswith("}", i):
            return obj, i + 1
        m = _KEY.match(s, i)
        if not m:
            raise _Bad
        obj[m.group(1)], i = _value(s, m.end())
        i = _sep(s, i, "}")
        if s.startswith("}", i):
            return obj, i + 1
        i += 1


def calls_from_function_gemma(body: str) -> list[tuple[str, str]] | None:
    """`call:NAME{...}` (one or more) -> [(name, arguments_json)]; None when malformed."""
    calls, i = [], 0
    try:
        while body[i:].strip():
            m = _CALL.match(body, i)
            if not m:
                return None
            args, i = _object(body, m.end())
            calls.append((m.group(1), dumps(args)))
    except (_Bad, RecursionError):
        return None
    return calls or None


def _is_function_gemma(tmpl: str, arch: str) -> bool:
    return START in tmpl or "start_function_declaration" in tmpl


def _is_gemma(tmpl: str, arch: str) -> bool:
    return "tool_code" in tmpl or (arch.startswith("gemma") and "<start_of_turn>" in tmpl) \
        or (arch.startswith("gemma") and not tmpl)


FAMILIES = (
    Family("function_gemma", detect=_is_function_gemma,
           matchers=lambda: [Tagged(START, END, calls_from_function_gemma)],
           triggers=(START,), wrapper=FUNCTION_GEMMA, priority=10),
    Family("gemma", detect=_is_gemma,
           matchers=lambda: [Tagged(TOOL_CODE, "```", calls_from_python)] + generic_matchers(),
           triggers=(TOOL_CODE, "```json"), wrapper=GEMMA_TOOL_CODE, priority=60),
)
