"""Hermes / Qwen 2.5 / Qwen 3: <tool_call>{"name": ..., "arguments": {...}}</tool_call>,
one block per call (parallel calls are several blocks). Qwen3-Coder's XML body
<function=NAME><parameter=KEY>value</parameter></function> is read too."""

from __future__ import annotations

import re

from edge_infer.chat.families.generic import generic_matchers
from edge_infer.chat.families.jsonscan import calls_from_text, dumps, loads
from edge_infer.chat.families.matchers import Tagged
from edge_infer.chat.families.family import Family
from edge_infer.chat.families.syntax import HERMES

OPEN, CLOSE = "<tool_call>", "</tool_call>"
_FUNCTION = re.compile(r"\s*<function=([^>\s]+)>(.*?)</function>\s*", re.S)
_PARAM = re.compile(r"\s*<parameter=([^>\s]+)>\n?(.*?)\n?</parameter>\s*", re.S)


def calls_from_xml(body: str) -> list[tuple[str, str]] | None:
    m = _FUNCTION.fullmatch(body)
    if not m:
        return None
    args, inner, i = {}, m.group(2), 0
    while inner[i:].strip():
        p = _PARAM.match(inner, i)
        if not p:
            return None
        raw = p.group(2)
        value = loads(raw)
        args[p.group(1)] = raw if value is None and raw.strip() != "null" else value
        i = p.end()
    return [(m.group(1), dumps(args))]


def decode(body: str) -> list[tuple[str, str]] | None:
    return calls_from_text(body) or calls_from_xml(body)


FAMILIES = (Family("hermes", detect=lambda tmpl, arch: OPEN in tmpl,
                   matchers=lambda: [Tagged(OPEN, CLOSE, decode)] + generic_matchers(),
                   triggers=(OPEN,), wrapper=HERMES, priority=20),)
