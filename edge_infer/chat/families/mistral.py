"""Mistral: [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...] (v3 tokenizer) and
[TOOL_CALLS]name[ARGS]{...} (v11+; optionally name[CALL_ID]id[ARGS]{...}), repeated."""

from __future__ import annotations

import re

from edge_infer.chat.families.jsonscan import arguments_json, json_end, loads
from edge_infer.chat.families.matchers import Done, Fail, JsonObjectAfter
from edge_infer.chat.families.family import Family
from edge_infer.chat.families.syntax import MISTRAL

TOOL_CALLS, ARGS, CALL_ID = "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"
_NAME = re.compile(r"[A-Za-z0-9_.\-]+")
_ID = re.compile(r"[A-Za-z0-9]*")


class MistralCalls(JsonObjectAfter):
    def __init__(self):
        super().__init__(TOOL_CALLS)

    def match(self, buf: str, final: bool):
        i = len(TOOL_CALLS)
        while i < len(buf) and buf[i].isspace():
            i += 1
        if i < len(buf) and buf[i] in "[{":
            return super().match(buf, final)
        m = _NAME.match(buf, i)
        j = m.end() if m else i
        if j == len(buf):
            return None if not final else Fail(len(buf))
        if m is None:
            return Fail(i)
        name = m.group()
        rest = buf[j:]
        if rest.startswith(CALL_ID):                      # [CALL_ID]abc123[ARGS]
            k = buf.find(ARGS, j)
            if k < 0:
                return None if not final and _could_be_id(buf[j + len(CALL_ID):]) else Fail(j)
            j = k
        elif not rest.startswith(ARGS):
            return None if not final and (ARGS.startswith(rest) or CALL_ID.startswith(rest)) \
                else Fail(j)
        a = j + len(ARGS)
        while a < len(buf) and buf[a].isspace():
            a += 1
        if a == len(buf):
            return None if not final else Fail(len(buf))
        end = json_end(buf, a) if buf[a] == "{" else -2
        if end == -1:
            return None if not final else Fail(len(buf))
        if end == -2:
            return Fail(a)
        value = loads(buf[a:end])
        args = arguments_json(value) if isinstance(value, dict) else None
        return Done(end, [(name, args)]) if args is not None else Fail(end)


def _could_be_id(s: str) -> bool:
    """s (after [CALL_ID]) is still an id that [ARGS] may follow."""
    m = _ID.match(s)
    return m.end() <= 64 and ARGS.startswith(s[m.end():])


FAMILIES = (Family("mistral", detect=lambda tmpl, arch: TOOL_CALLS in tmpl, matchers=lambda: [MistralCalls()],
                   triggers=(TOOL_CALLS,), wrapper=MISTRAL, priority=20),)
