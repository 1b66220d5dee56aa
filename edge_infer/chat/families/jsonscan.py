"""Small JSON helpers shared by the families: where a value ends, and what counts as a call."""

from __future__ import annotations

import json

_OPEN = {"{": "}", "[": "]"}


def json_end(s: str, i: int) -> int:
    """Index just past the balanced JSON object/array starting at s[i], or -1 if it is
    not closed yet (or brackets mismatch: -2). Strings and escapes are respected."""
    if i >= len(s) or s[i] not in _OPEN:
        return -2
    stack, in_str, esc = [], False, False
    for j in range(i, len(s)):
        c = s[j]
        if in_str:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c in _OPEN:
            stack.append(_OPEN[c])
        elif c in "}]":
            if not stack or stack.pop() != c:
                return -2
            if not stack:
                return j + 1
    return -1


def loads(text: str):
    """json.loads that answers None instead of raising."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def dumps(value) -> str:
    return json.dumps(value, ensure_ascii=False)


def arguments_json(args) -> str | None:
    """Arguments as a JSON object text; a string that holds JSON is unwrapped."""
    if isinstance(args, str):
        inner = loads(args) if args.strip() else {}
        args = inner
    if args is None:
        return "{}"
    if not isinstance(args, dict):
        return None
    return dumps(args)


def call_from_obj(obj) -> tuple[str, str] | None:
    """(name, arguments_json) from {"name", "arguments"|"parameters"}, also wrapped as
    {"type": "function", "function": {...}}; None when the object is not a call."""
    if not isinstance(obj, dict):
        return None
    if isinstance(obj.get("function"), dict) and "name" not in obj:
        obj = obj["function"]
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        return None
    if set(obj) - {"name", "arguments", "parameters", "type", "id"}:
        return None
    args = obj.get("arguments", obj.get("parameters"))
    aj = arguments_json(args)
    return None if aj is None else (name, aj)


def calls_from_value(value) -> list[tuple[str, str]] | None:
    """One call (an object) or several (a non-empty array of call objects); else None."""
    items = value if isinstance(value, list) else [value]
    if not items:
        return None
    calls = [call_from_obj(v) for v in items]
    return None if any(c is None for c in calls) else calls


def calls_from_text(text: str) -> list[tuple[str, str]] | None:
    value = loads(text.strip())
    return None if value is None else calls_from_value(value)


def is_prefix_of_any(s: str, words) -> bool:
    return any(w.startswith(s) for w in words)
