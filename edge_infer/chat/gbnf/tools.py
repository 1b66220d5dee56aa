"""GBNF that makes a whole reply tool calls (tool_choice "required" or a named function).

Each function's arguments grammar comes from its JSON schema (json_schema.py, after
llama.cpp's C++ converter, or values.py for FunctionGemma's and Python's syntax); its
rules get a prefix per function so the grammars of several functions live in one. The
wrapper around the calls is the model family's syntax (toolcalls/wrappers.py; Hermes /
Qwen: `<tool_call>\\n{"name": ..., "arguments": ...}\\n</tool_call>`).
"""

from __future__ import annotations

import re

from edge_infer.chat.families.syntax import HERMES, LLAMA3, MISTRAL, CallWrapper  # noqa: F401
from edge_infer.chat.gbnf.json_schema import json_schema_grammar
from edge_infer.chat.gbnf.values import SYNTAXES, arguments_grammar
from edge_infer.chat.gbnf.values import lit as literal  # text as a GBNF string literal


class ToolGrammarError(ValueError):
    def __init__(self, message: str, index: int | None = None):
        super().__init__(message)
        self.index = index  # which of the tools it is about


# A GBNF rule body's pieces: string literals, character classes, <token>s and {m,n} counts
# are left as they are (a rule may be named "3", after a property); every other word is a rule name.
_PIECE = re.compile(r'"(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\]|<[^>\s]*>|#[^\n]*|\{[0-9,\s]*\}|[a-zA-Z0-9_-]+|\s+|.',
                    re.S)


def prefixed(gbnf: str, prefix: str) -> tuple[str, str]:
    """(the grammar with every rule renamed PREFIX-name, the name its root now has)."""
    rules = []
    for line in gbnf.strip().splitlines():
        name, sep, body = line.partition(" ::= ")
        if not sep:  # the converters write one rule per line
            raise ValueError(f"unexpected grammar line {line[:80]!r}")
        rules.append((name.strip(), body))
    names = {n for n, _ in rules}

    def rename(body: str) -> str:
        return "".join(f"{prefix}-{p}" if p in names else p for p in _PIECE.findall(body))

    return "\n".join(f"{prefix}-{n} ::= {rename(b)}" for n, b in rules), f"{prefix}-root"


def _sep(wrapper: CallWrapper) -> str:
    """The separator between calls as a GBNF item and a space (nothing when it is empty)."""
    return f"{literal(wrapper.separator)} " if wrapper.separator else ""


def arguments_gbnf(schema: dict, syntax: str = "json") -> str:
    """The arguments' grammar: our JSON converter (strings without raw control characters,
    annotation-only schemas such as {"description": ...} allow any value), or ours for
    other syntaxes."""
    if syntax != "json":
        return arguments_grammar(schema, SYNTAXES[syntax])
    return json_schema_grammar(schema)


def tool_call_grammar(tools: list[dict], choice: str, wrapper: CallWrapper = HERMES,
                      parallel: bool = False, max_calls: int | None = None) -> str:
    """GBNF for a reply made of calls only: one call, or one or more when `parallel`
    (at most `max_calls`: a small model may repeat its call until max_tokens).

    tools: OpenAI tool dicts ({"type": "function", "function": {"name", "parameters"}}).
    choice: "required" (any of the tools) or the name of the one function to call.
    Raises ToolGrammarError (a ValueError) for a choice that forces nothing or a schema the converter can't map.
    """
    fns = list(enumerate(t["function"] for t in tools))
    if choice != "required":
        fns = [(i, f) for i, f in fns if f["name"] == choice]
        if not fns:
            raise ToolGrammarError(f"tool_choice names {choice!r}, which is not among the tools")
    if not fns:
        raise ToolGrammarError("tool_choice 'required' needs at least one tool")
    rules, alts = [], []
    for i, fn in fns:
        schema = fn.get("parameters") or {"type": "object", "properties": {}}
        try:
            body, root = prefixed(arguments_gbnf(schema, wrapper.syntax), f"fn{i}")
        except Exception as exc:  # the converter raises assorted errors on schemas it can't map
            raise ToolGrammarError(f"cannot turn the parameters of {fn['name']!r} into a grammar: {exc}",
                                   i) from None
        rules.append(f"fn{i}-call ::= {literal(wrapper.call_open + fn['name'] + wrapper.name_close)} "
                     f"{root} {literal(wrapper.call_close)}")
        rules.append(body)
        alts.append(f"fn{i}-call")
    more = "*" if max_calls is None else f"{{0,{max_calls - 1}}}"
    calls = f"call ({_sep(wrapper)}call){more}" if parallel and max_calls != 1 else "call"
    seq = ([literal(wrapper.list_open)] if wrapper.list_open else []) + [calls] + \
        ([literal(wrapper.list_close)] if wrapper.list_close else [])
    head = [f"root ::= {' '.join(seq)}", f"call ::= {' | '.join(alts)}"]
    return "\n".join(head + rules) + "\n"


def tool_call_continuation(tools: list[dict], wrapper: CallWrapper = HERMES, parallel: bool = True,
                           max_calls: int | None = None) -> str:
    """GBNF for what follows `wrapper.trigger` once a reply has written it (tool_choice
    "auto"): the rest of that call, then only more calls. Whitespace may come first (a
    token can end the trigger with a newline already)."""
    full = tool_call_grammar(tools, "required", wrapper, parallel=parallel, max_calls=max_calls)
    opening = wrapper.list_open + wrapper.call_open  # what the first call starts with
    if not wrapper.trigger or not opening.startswith(wrapper.trigger):
        raise ToolGrammarError(f"the wrapper's trigger {wrapper.trigger!r} does not open its calls")
    rest = opening[len(wrapper.trigger):].lstrip()
    firsts = []
    for line in full.splitlines():  # every fn{i}-call rule, without the trigger in front
        m = re.match(r'^(fn\d+)-call ::= "((?:[^"\\]|\\.)*)" (.*)$', line)
        if m:
            name_part = m.group(2).replace("\\n", "\n").replace('\\"', '"').replace("\\\\", "\\")
            after_open = name_part[len(wrapper.call_open):]  # NAME + name_close
            firsts.append(f"{m.group(1)}-first ::= {literal(rest + after_open)} {m.group(3)}")
    head, _, body = full.partition("\n")
    more = "*" if max_calls is None else f"{{0,{max_calls - 1}}}"
    tail = f" ({_sep(wrapper)}call){more}" if parallel and max_calls != 1 else ""
    close = f" {literal(wrapper.list_close)}" if wrapper.list_close else ""
    if not tail:  # one call only: the whole-call rules would be unreachable
        body = "\n".join(r for r in body.splitlines() if not re.match(r"^(call|fn\d+-call) ::= ", r))
    alts = " | ".join(f.split(" ::= ")[0] for f in firsts)
    # Whitespace may lead only where the trigger ends between tokens of the syntax, not
    # inside a string (Llama 3's trigger ends at the name's opening quote).
    lead = "[ \\t\\n]* " if opening[len(wrapper.trigger):] else ""
    return "\n".join([f"root ::= {lead}first{tail}{close}", f"first ::= {alts}", *firsts, body]) + "\n"
