"""JSON Schema -> GBNF for tool-call arguments written in a syntax that is not JSON.

FunctionGemma writes `{city:<escape>Paris<escape>,days:3}` and Gemma's tool_code writes
Python keywords `city="Paris", days=3`; llama.cpp's converter only speaks JSON, so these
families get this one. It covers what tool schemas use: type (also lists of types), enum,
const, properties / required, additionalProperties, items, minItems / maxItems,
minLength / maxLength, anyOf / oneOf and local $ref. Keywords a grammar cannot hold
(pattern, format, minimum, ...) are left to the model: the call always parses, those
bounds are not enforced.
"""

from __future__ import annotations

import json
import keyword
import re
from dataclasses import dataclass

# Bounded as llama.cpp's JSON converter bounds them: a small model can write digits forever.
INTEGER = '"-"? ("0" | [1-9] [0-9]{0,15})'
NUMBER = INTEGER + ' ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?'
_LITERALS = re.compile(r'"(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\]')  # skipped when finding rule names
_WORD = re.compile(r"[A-Za-z0-9-]+")
BARE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")  # what toolcalls/gemma.py reads back


def lit(text: str) -> str:
    """Text as a GBNF string literal."""
    out = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r") \
        .replace("\t", "\\t")
    return f'"{out}"'


class SchemaGrammarError(ValueError):
    pass


@dataclass(frozen=True)
class ValueSyntax:
    name: str
    string_char: str             # one character of a string's text
    string_open: str
    string_close: str
    true: str
    false: str
    null: str
    item_sep: str
    kv_sep: str                  # between a key and its value
    key_quote: str               # "" for bare keys
    top_open: str = "{"          # around the top-level arguments object
    top_close: str = "}"
    top_kv_sep: str | None = None  # the top level's own key/value separator (Python's "=")
    counted_char: str = "char"   # a rule that is exactly one character of the value (for lengths)
    escaped_strings: bool = False  # strings carry escapes (JSON's, which Python reads too)

    def string_value(self, text: str) -> str:
        if self.escaped_strings:
            return lit(json.dumps(text, ensure_ascii=False))
        return lit(self.string_open + text + self.string_close)

    def key(self, name: str, top: bool) -> str:
        if top and self.top_kv_sep is not None:
            if not name.isidentifier() or keyword.iskeyword(name):
                raise SchemaGrammarError(f"property {name!r} cannot be a Python keyword argument")
            return lit(name + self.top_kv_sep)
        if not self.key_quote and not BARE_KEY.fullmatch(name):
            raise SchemaGrammarError(f"property {name!r} cannot be a bare key in this syntax")
        return lit(f"{self.key_quote}{name}{self.key_quote}{self.kv_sep}")


# FunctionGemma: a string cannot hold "<escape>"; "<" followed by anything but "e" or "<" is fine.
# Its strings have no escapes, so a tab or a newline is written as itself (the reader turns
# the value into JSON); the other control characters are left out, as in JSON strings.
_FG_CHAR = "[^<\\x00-\\x08\\x0B-\\x1F\\x7F]"
FUNCTION_GEMMA = ValueSyntax("function_gemma", string_char=f'{_FG_CHAR} | "<" {_FG_CHAR.replace("[^<", "[^e<")}',
                             string_open="<escape>", string_close="<escape>", true="true", false="false",
                             null="null", item_sep=",", kv_sep=":", key_quote="", counted_char=_FG_CHAR)
# Python literals (ast.literal_eval reads them back): the top level is keyword arguments. No raw
# control character in a string: Python's tokenizer ends a line at CR and refuses NUL.
PYTHON = ValueSyntax("python", string_char='[^"\\\\\\x7F\\x00-\\x1F] | "\\\\" ["\\\\bfnrt]', string_open='"',
                     string_close='"', true="True", false="False", null="None", item_sep=", ",
                     kv_sep=": ", key_quote='"', top_open="", top_close="", top_kv_sep="=",
                     escaped_strings=True)
SYNTAXES = {"function_gemma": FUNCTION_GEMMA, "python": PYTHON}


class _Converter:
    def __init__(self, syntax: ValueSyntax, root_schema: dict):
        self.s, self.root_schema = syntax, root_schema
        self.rules: dict[str, str] = {}
        self._refs: dict[str, str] = {}

    def rule(self, name: str, body: str) -> str:
        self.rules.setdefault(name, body)
        return name

    def common(self) -> None:
        s = self.s
        self.rule("char", s.string_char)
        self.rule("string", f"{lit(s.string_open)} char* {lit(s.string_close)}")
        self.rule("number", NUMBER)
        self.rule("integer", INTEGER)
        self.rule("boolean", f"{lit(s.true)} | {lit(s.false)}")
        self.rule("null", lit(s.null))
        key = f'{lit(s.key_quote)} [A-Za-z_] [A-Za-z0-9_]* {lit(s.key_quote)}' if s.key_quote \
            else "[A-Za-z_] [A-Za-z0-9_]*"
        self.rule("any-object", f'"{{" (any-kv ({lit(s.item_sep)} any-kv)*)? "}}"')
        self.rule("any-kv", f"{key} {lit(s.kv_sep)} any")
        self.rule("any-array", f'"[" (any ({lit(s.item_sep)} any)*)? "]"')
        self.rule("any", "string | number | boolean | null | any-array | any-object")

    def value(self, schema, path: str, top: bool = False) -> str:
        """A GBNF expression for values of `schema`; named rules go to self.rules."""
        if schema is True or schema == {} or schema is None:
            return "any" if not top else self.free_object(top)
        if schema is False:
            raise SchemaGrammarError(f"{path or 'the arguments'} allow no value")
        if not isinstance(schema, dict):
            raise SchemaGrammarError(f"{path or 'the arguments'}: a schema must be an object")
        if "$ref" in schema:
            return self.ref(schema["$ref"], top)
        if "const" in schema:
            return self.literal_value(schema["const"], path)
        if "enum" in schema:
            return "(" + " | ".join(self.literal_value(v, path) for v in schema["enum"]) + ")"
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return "(" + " | ".join(self.value(sub, f"{path}.{key}[{i}]", top)
                                        for i, sub in enumerate(schema[key])) + ")"
        kind = schema.get("type")
        if isinstance(kind, list):
            return "(" + " | ".join(self.value({**schema, "type": k}, path, top) for k in kind) + ")"
        if kind == "object" or (kind is None and "properties" in schema):
            return self.object(schema, path, top)
        if top:
            raise SchemaGrammarError("the arguments must be an object")
        if kind == "array" or (kind is None and "items" in schema):
            return self.array(schema, path)
        if kind == "string":
            lo, hi = schema.get("minLength", 0), schema.get("maxLength")
            if not lo and hi is None:
                return "string"
            reps = f"{{{lo},{'' if hi is None else hi}}}"
            one = self.s.counted_char  # "<x" is two characters: a bounded string leaves "<" out
            one = one if one == "char" else f"({one})"
            return f"{lit(self.s.string_open)} {one}{reps} {lit(self.s.string_close)}"
        if kind in ("number", "integer", "boolean", "null"):
            return kind
        return "any"

    def literal_value(self, v, path: str) -> str:
        s = self.s
        if isinstance(v, str):
            return s.string_value(v)
        if isinstance(v, bool):
            return lit(s.true if v else s.false)
        if v is None:
            return lit(s.null)
        if isinstance(v, (int, float)):
            return lit(json.dumps(v))
        raise SchemaGrammarError(f"{path or 'the arguments'}: enum/const values must be scalars here")

    def ref(self, ref: str, top: bool) -> str:
        if not isinstance(ref, str) or not ref.startswith("#/"):
            raise SchemaGrammarError(f"$ref {ref!r}: only local references (#/$defs/...) are supported")
        if ref in self._refs:
            return self._refs[ref]
        name = self._refs[ref] = f"ref-{len(self._refs)}"
        target = self.root_schema
        for part in ref[2:].split("/"):
            if not isinstance(target, dict) or part not in target:
                raise SchemaGrammarError(f"$ref {ref!r} points at nothing")
            target = target[part]
        self.rules[name] = ""  # reserved: a recursive schema refers to it while it is built
        self.rules[name] = self.value(target, ref, top)
        return name

    def free_object(self, top: bool) -> str:
        """Any keys: an object, or (Python's top level) any keyword arguments."""
        if not (top and self.s.top_kv_sep is not None):
            return "any-object"
        self.rule("py-kwarg", f"[A-Za-z_] [A-Za-z0-9_]* {lit(self.s.top_kv_sep)} any")
        return f'(py-kwarg ({lit(self.s.item_sep)} py-kwarg)*)?'

    def array(self, schema: dict, path: str) -> str:
        item = self.value(schema.get("items", True), f"{path}[]")
        lo, hi = int(schema.get("minItems", 0)), schema.get("maxItems")
        if hi is not None and int(hi) < lo:
            raise SchemaGrammarError(f"{path or 'the arguments'}: minItems is above maxItems")
        if hi is not None and int(hi) == 0:
            return '"[" "]"'
        sep = lit(self.s.item_sep)
        more = f"({sep} {item})" + ("*" if hi is None and lo <= 1 else
                                   f"{{{max(lo - 1, 0)},{'' if hi is None else int(hi) - 1}}}")
        items = f"{item} {more}"
        return f'"[" {items if lo else f"({items})?"} "]"'

    def object(self, schema: dict, path: str, top: bool) -> str:
        props = schema.get("properties") or {}
        if not props:
            return self.free_object(top)
        required = [k for k in props if k in set(schema.get("required") or ())]
        optional = [k for k in props if k not in required]
        kv = {k: f"{self.s.key(k, top)} {self.value(props[k], f'{path}.{k}')}" for k in props}
        sep = lit(self.s.item_sep)
        if required:
            body = f" {sep} ".join(kv[k] for k in required) + "".join(f" ({sep} {kv[k]})?" for k in optional)
        else:  # any subset of the optional ones, in order, separators only between them
            alts = [kv[k] + "".join(f" ({sep} {kv[o]})?" for o in optional[i + 1:])
                    for i, k in enumerate(optional)]
            body = "(" + " | ".join(f"({a})" for a in alts) + ")?"
        opened, closed = (self.s.top_open, self.s.top_close) if top else ("{", "}")
        return " ".join(p for p in (lit(opened) if opened else "", f"({body})", lit(closed) if closed else "") if p)


def arguments_grammar(schema: dict, syntax: ValueSyntax) -> str:
    """GBNF whose root is the arguments of a function with this parameters schema."""
    conv = _Converter(syntax, schema)
    conv.common()
    rules = {"root": conv.value(schema, "", top=True), **conv.rules}
    used, todo = {"root"}, ["root"]
    while todo:  # only the rules root reaches: the server's checker refuses unused ones
        for word in _WORD.findall(_LITERALS.sub(" ", rules[todo.pop()])):
            if word in rules and word not in used:
                used.add(word)
                todo.append(word)
    return "".join(f"{name} ::= {body}\n" for name, body in rules.items() if name in used)
