"""The fixed pieces of JSON grammars: primitive rules, string formats, whitespace, literals.

The same rules as llama.cpp's C++ converter (common/json-schema-to-grammar.cpp), whose
`char` keeps a string's raw text free of `"`, `\\` and the control characters U+0000-U+001F
and U+007F, which JSON only allows escaped (llama-cpp-python's Python port lets them in,
and a small model then writes raw newlines into a string until max_tokens).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

# llama.cpp's whitespace: nothing, a space, or one or two newlines and an indent, bounded so a
# model cannot write whitespace for ever between two tokens of the syntax.
SPACE = '| " " | "\\n"{1,2} [ \\t]{0,20}'

# One character of a JSON string's text: a character that needs no escape, or an escape.
SAFE_CHAR_CLASS = '[^"\\\\\\x7F\\x00-\\x1F]'
CHAR = SAFE_CHAR_CLASS + ' | [\\\\] (["\\\\bfnrt] | "u" [0-9a-fA-F]{4})'


@dataclass(frozen=True)
class Builtin:
    body: str
    deps: tuple[str, ...] = ()


PRIMITIVES: dict[str, Builtin] = {
    "boolean": Builtin('("true" | "false")'),
    "decimal-part": Builtin("[0-9]{1,16}"),
    "integral-part": Builtin("[0] | [1-9] [0-9]{0,15}"),
    "number": Builtin('("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)?',
                      ("integral-part", "decimal-part")),
    "integer": Builtin('("-"? integral-part)', ("integral-part",)),
    "value": Builtin("object | array | string | number | boolean | null",
                     ("object", "array", "string", "number", "boolean", "null")),
    "object": Builtin('"{" space ( string ":" space value ("," space string ":" space value)* )? space "}"',
                      ("string", "value")),
    "array": Builtin('"[" space ( value ("," space value)* )? space "]"', ("value",)),
    "uuid": Builtin('"\\"" [0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} '
                    '"-" [0-9a-fA-F]{12} "\\""'),
    "char": Builtin(CHAR),
    "string": Builtin('"\\"" char* "\\""', ("char",)),
    "null": Builtin('"null"'),
}

STRING_FORMATS: dict[str, Builtin] = {
    "date": Builtin('[0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [1-2] [0-9] | "3" [0-1] )'),
    "time": Builtin('([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{3} )? '
                    '( "Z" | ( "+" | "-" ) ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )'),
    "date-time": Builtin('date "T" time', ("date", "time")),
    "date-string": Builtin('"\\"" date "\\""', ("date",)),
    "time-string": Builtin('"\\"" time "\\""', ("time",)),
    "date-time-string": Builtin('"\\"" date-time "\\""', ("date-time",)),
}

# A schema's names for rules may not take these (a property called "number" gets "number-").
RESERVED = frozenset({"root", *PRIMITIVES, *STRING_FORMATS})



class SchemaError(ValueError):
    """A schema that has no grammar here; the message names the place (a JSON pointer)."""


def literal(text: str) -> str:
    """Text as a GBNF string literal (llama.cpp's format_literal, plus the other control
    characters as \\x escapes so no raw one reaches the grammar text)."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def json_text(value) -> str:
    """A JSON value as compact text, as nlohmann's dump() writes it (UTF-8 kept raw)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def repetition(item: str, lo: int, hi: int | None, separator: str = "") -> str:
    """`item` repeated lo..hi times (hi None: no bound), `separator` between copies
    (llama.cpp's build_repetition, for arrays' items and strings' characters)."""
    if hi == 0:
        return ""
    if lo == 0 and hi == 1:
        return item + "?"
    if not separator:
        if lo == 1 and hi is None:
            return item + "+"
        if lo == 0 and hi is None:
            return item + "*"
        return f"{item}{{{lo},{'' if hi is None else hi}}}"
    rest = repetition(f"({separator} {item})", max(lo - 1, 0), None if hi is None else hi - 1)
    out = f"{item} {rest}"
    return f"({out})?" if lo == 0 else out
