"""Python-call syntax (Gemma 3 tool_code, Llama 3.1 built-in tools): `fn(a=1, b="x")`,
`print(default_api.fn(...))`, `brave_search.call(query="...")`; literals only, parsed
with ast (nothing is evaluated)."""

from __future__ import annotations

import ast

from edge_infer.chat.families.jsonscan import dumps


def _name(func) -> str | None:
    parts = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if not isinstance(func, ast.Name):
        return None
    parts.append(func.id)
    parts.reverse()
    if parts[0] == "default_api":
        parts = parts[1:]
    if len(parts) > 1 and parts[-1] == "call":      # brave_search.call(...)
        parts = parts[:-1]
    return ".".join(parts) or None


def _call(node) -> tuple[str, str] | None:
    if not isinstance(node, ast.Call) or node.args and not (
            isinstance(node.func, ast.Name) and node.func.id == "print"):
        return None
    if isinstance(node.func, ast.Name) and node.func.id == "print":
        if len(node.args) != 1 or node.keywords:
            return None
        return _call(node.args[0])
    name = _name(node.func)
    if name is None or any(k.arg is None for k in node.keywords):
        return None
    try:
        args = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
        return name, dumps(args)
    except (ValueError, TypeError, SyntaxError, RecursionError):
        return None


def calls_from_python(text: str) -> list[tuple[str, str]] | None:
    """Every statement a call (or a list of calls) -> [(name, arguments_json)]; else None."""
    try:
        tree = ast.parse(text.strip())
    except (SyntaxError, ValueError, RecursionError):
        return None
    calls = []
    for stmt in tree.body:
        if not isinstance(stmt, ast.Expr):
            return None
        nodes = stmt.value.elts if isinstance(stmt.value, (ast.List, ast.Tuple)) else [stmt.value]
        for node in nodes:
            call = _call(node)
            if call is None:
                return None
            calls.append(call)
    return calls or None
