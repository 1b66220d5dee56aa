"""JSON Schema -> GBNF: every string the grammar completes is JSON, and JSON the schema
accepts as far as the keywords below reach.

Follows llama.cpp's C++ converter (common/json-schema.cpp reads the schema,
common/json-schema-to-grammar.cpp writes the rules) rule for rule, so grammars read as
llama-server's do: types and type lists, enum / const, anyOf / oneOf / allOf, local $ref
(recursion too), properties / required / additionalProperties, items / prefixItems /
minItems / maxItems, minLength / maxLength, pattern, format (date, time, date-time, uuid),
integer bounds as digit rules; whitespace is llama.cpp's `space`. Where JSON or the schema
needs more than llama.cpp gives, ours differs, each noted where it is done: patterns,
keys outside the declared ones, number bounds, a minimum such as 100, an empty key.
Keywords that constrain what a grammar cannot count (multipleOf, uniqueItems,
minProperties, not, ...) are left to the model, as llama.cpp does.

A schema that cannot be turned into a grammar raises SchemaError naming where and why.
"""

from __future__ import annotations

import logging
import re

from edge_infer.chat.gbnf.check import CheckedGrammar, checked_gbnf
from edge_infer.chat.gbnf.json_keys import all_of_members, object_members, object_rule
from edge_infer.chat.gbnf.json_pattern import PatternError, PatternParser, Unsupported, anchors
from edge_infer.chat.gbnf.json_ranges import integer_body, number_body
from edge_infer.chat.gbnf.json_rules import (PRIMITIVES, RESERVED, SAFE_CHAR_CLASS, SPACE, STRING_FORMATS,
                                             SchemaError, json_text, literal, repetition)
from edge_infer.chat.gbnf.scan import GrammarError

log = logging.getLogger("edge_infer.grammar")

MAX_COUNT = 1000     # the largest {m,n} the grammar checker lets through
MAX_NESTING = 100    # schemas nested deeper are refused, not a Python RecursionError
_NAME_CHARS = re.compile(r"[^a-zA-Z0-9-]+")
_FORMATS = {"date": "date-string", "time": "time-string", "date-time": "date-time-string",
            **{f: "uuid" for f in ("uuid", "uuid1", "uuid2", "uuid3", "uuid4", "uuid5")}}


def json_schema_grammar(schema) -> CheckedGrammar:
    """GBNF (root rule `root`) for the JSON values `schema` accepts."""
    conv = _Converter(schema)
    conv.visit(schema, "", "#")
    text = "".join(f"{name} ::= {body}\n" for name, body in sorted(conv.rules.items()))
    try:
        return checked_gbnf(text, allow_unused=True)
    except GrammarError as exc:
        raise SchemaError(f"its grammar cannot be used: {exc}") from None


def _count(schema: dict, key: str, path: str, default):
    if key not in schema:
        return default
    v = schema[key]
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise SchemaError(f"{path}: {key} must be a non-negative integer")
    if v > MAX_COUNT:
        raise SchemaError(f"{path}: {key} {v} is above {MAX_COUNT}, the most a grammar here can count; "
                          f"leave it out or lower it")
    return v


class _Converter:
    def __init__(self, root):
        self.root = root
        self.rules: dict[str, str] = {"space": SPACE}
        self.resolving: set[str] = set()
        self.depth = 0

    # -- rules ---------------------------------------------------------------------------------

    def add_rule(self, name: str, body: str) -> str:
        """llama.cpp's _add_rule: a name taken by another body gets a number after it."""
        name = _NAME_CHARS.sub("-", name)
        if self.rules.get(name, body) == body:
            self.rules[name] = body
            return name
        i = 0
        while f"{name}{i}" in self.rules and self.rules[f"{name}{i}"] != body:
            i += 1
        self.rules[f"{name}{i}"] = body
        return f"{name}{i}"

    def primitive(self, name: str, kind: str | None = None) -> str:
        """A built-in rule (kind's body, under `name`) and the rules it uses."""
        kind = kind or name
        builtin = PRIMITIVES.get(kind) or STRING_FORMATS[kind]
        out = self.add_rule(name, builtin.body)
        for dep in builtin.deps:
            if dep not in self.rules:
                self.primitive(dep)
        return out

    # -- reading the schema (common/json-schema.cpp's build_node, same order) ------------------

    def kind(self, s, path: str) -> str:
        if s is True:
            return "any"
        if s is False:
            raise SchemaError(f"{path}: the schema false allows no value")
        if not isinstance(s, dict):
            raise SchemaError(f"{path}: a schema must be an object")
        if "$ref" in s:
            return "ref"
        if "oneOf" in s or "anyOf" in s:
            return "anyOf"
        t = s.get("type")
        if isinstance(t, list):
            if not t:
                raise SchemaError(f"{path}: type must not be empty")
            return "types"
        if "const" in s:
            return "const"
        if "enum" in s:
            if not isinstance(s["enum"], list) or not s["enum"]:
                raise SchemaError(f"{path}: enum must be a non-empty array")
            return "enum"
        if t is not None and not isinstance(t, str):
            raise SchemaError(f"{path}: type must be a string or an array of strings")
        has_props = "properties" in s or ("additionalProperties" in s and s["additionalProperties"] is not True)
        if t is None:
            if has_props:
                return "object"
            if "allOf" in s:
                return "allOf"
            if "items" in s or "prefixItems" in s:
                return "array"
            if {"pattern", "minLength", "maxLength"} & s.keys() or _FORMATS.get(str(s.get("format"))):
                return "string"
            return "any"
        if t == "object" and not has_props and "allOf" in s or t == "string" and "allOf" in s:
            return "allOf"
        if t in ("object", "array", "string", "integer", "number", "boolean", "null"):
            return t
        raise SchemaError(f"{path}: unrecognized type {t!r}")

    def is_any(self, s, path: str) -> bool:
        return self.kind(s, path) == "any"

    def target(self, ref, path: str):
        """(the schema a local $ref points at, its name in the grammar)."""
        if not isinstance(ref, str):
            raise SchemaError(f"{path}: $ref must be a string")
        if ref != "#" and not ref.startswith("#/"):
            raise SchemaError(f"{path}: unsupported $ref {ref}: only references into the same document "
                              "(#/$defs/...) are supported")
        node = self.root
        for token in ref[2:].split("/") if ref != "#" else ():
            token = token.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and token in node:
                node = node[token]
            elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                node = node[int(token)]
            else:
                raise SchemaError(f"{path}: cannot resolve $ref {ref}: {token} not found")
        return node, "ref" + _NAME_CHARS.sub("-", ref[1:])

    # -- writing rules (json-schema-to-grammar.cpp's visit) ------------------------------------

    def visit(self, s, name: str, path: str) -> str:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise SchemaError(f"{path}: the schema is nested more than {MAX_NESTING} deep")
        try:
            return self._visit(s, name, path)
        finally:
            self.depth -= 1

    def _visit(self, s, name: str, path: str) -> str:
        rule_name = name + "-" if name in RESERVED else name or "root"
        sub = f"{name}-" if name else ""
        kind = self.kind(s, path)
        if kind == "ref":
            target, ref_name = self.target(s["$ref"], path)
            if ref_name not in self.rules and s["$ref"] not in self.resolving:
                self.resolving.add(s["$ref"])
                ref_name = self.visit(target, ref_name, s["$ref"])
                self.resolving.discard(s["$ref"])
            return self.add_rule(rule_name, ref_name)
        if kind in ("anyOf", "types"):
            key = "oneOf" if "oneOf" in s else "anyOf"
            if kind == "types":  # {"type": [a, b], ...} is anyOf [{"type": a, ...}, {"type": b, ...}]
                alts, where = [{**s, "type": t} for t in s["type"]], f"{path}/type"
            else:
                alts, where = s[key], f"{path}/{key}"
                if not isinstance(alts, list) or not alts:
                    raise SchemaError(f"{where}: must be a non-empty array of schemas")
            rules = [self.visit(alt, f"{name}-{i}" if name else f"alternative-{i}", f"{where}/{i}")
                     for i, alt in enumerate(alts)]
            return self.add_rule(rule_name, " | ".join(rules))
        if kind == "allOf":
            return self.all_of(s, name, rule_name, path)
        if kind == "const":
            return self.add_rule(rule_name, self.constant(s["const"], path))
        if kind == "enum":
            return self.add_rule(rule_name, "(" + " | ".join(self.constant(v, path) for v in s["enum"]) + ")")
        if kind == "object":
            props, required, extra = object_members(s, path)
            if not props and extra is not None and self.is_any(extra, path):
                return self.add_rule(rule_name, self.primitive("object"))
            return self.add_rule(rule_name, object_rule(self, props, required, name, extra,
                                                        f"{path}/additionalProperties"))
        if kind == "array":
            return self.array(s, sub, rule_name, path)
        if kind == "string":
            return self.string(s, rule_name, path)
        if kind == "integer":
            return self.integer(s, rule_name, path)
        if kind == "number":
            return self.number(s, rule_name, path)
        if kind in ("boolean", "null"):
            return self.primitive("root" if rule_name == "root" else kind, kind)
        return self.add_rule(rule_name, self.primitive("value"))

    def constant(self, value, path: str) -> str:
        try:
            return literal(json_text(value))
        except ValueError:
            raise SchemaError(f"{path}: enum and const values must be JSON (no NaN or Infinity)") from None

    def all_of(self, s: dict, name: str, rule_name: str, path: str) -> str:
        """llama.cpp's _visit_all_of: the enums' common values, or the objects' properties merged."""
        common, props, required = all_of_members(self, s, path)
        if common:
            return self.add_rule(rule_name, "(" + " | ".join(common) + ")")
        return self.add_rule(rule_name, object_rule(self, props, required, name, None))

    def array(self, s: dict, sub: str, rule_name: str, path: str) -> str:
        items = s.get("items", s.get("prefixItems", True))
        if items is False:  # no items beyond prefixItems
            items = s.get("prefixItems", [])
        if isinstance(items, list):  # a tuple: exactly these
            body = ' "," space '.join(self.visit(item, f"{sub}tuple-{i}", f"{path}/items/{i}")
                                      for i, item in enumerate(items))
            return self.add_rule(rule_name, f'"[" space {body} space "]"')
        lo, hi = _count(s, "minItems", path, 0), _count(s, "maxItems", path, None)
        if hi is not None and hi < lo:
            raise SchemaError(f"{path}: minItems {lo} is above maxItems {hi}")
        if self.is_any(items, path) and lo == 0 and hi is None:
            return self.primitive("root" if rule_name == "root" else "array", "array")
        item = self.visit(items, f"{sub}item", f"{path}/items")
        return self.add_rule(rule_name, f'"[" space {repetition(item, lo, hi, chr(34) + "," + chr(34) + " space")} '
                                        'space "]"')

    def string(self, s: dict, rule_name: str, path: str) -> str:
        for key in ("pattern", "format"):
            if key in s and not isinstance(s[key], str):
                raise SchemaError(f"{path}: {key} must be a string")
        if "pattern" in s:
            return self.pattern(s["pattern"], rule_name, path)
        fmt = _FORMATS.get(str(s.get("format")))
        if fmt == "uuid":
            return self.primitive("root" if rule_name == "root" else "uuid", "uuid")
        if fmt:
            return self.add_rule(rule_name, self.primitive(fmt))
        lo, hi = _count(s, "minLength", path, 0), _count(s, "maxLength", path, None)
        if hi is not None and hi < lo:
            raise SchemaError(f"{path}: minLength {lo} is above maxLength {hi}")
        if lo or hi is not None:
            return self.add_rule(rule_name, f'"\\"" {repetition(self.primitive("char"), lo, hi)} "\\""')
        return self.primitive("root" if rule_name == "root" else "string", "string")

    def pattern(self, pattern: str, rule_name: str, path: str) -> str:
        """llama.cpp's _visit_pattern: a pattern with no grammar falls back to any string."""
        saved = dict(self.rules)
        try:
            body, start, end = anchors(pattern)
            rule = PatternParser(body, rule_name, self.add_rule,
                                 lambda: self.add_rule("dot", SAFE_CHAR_CLASS)).parse()
            parts = ['"\\""'] + ([] if start else [self.primitive("char") + "*"]) + ([f"({rule})"] if rule else []) \
                + ([] if end else [self.primitive("char") + "*"]) + ['"\\""']
            return self.add_rule(rule_name, " ".join(parts))
        except Unsupported as exc:
            self.rules = saved
            log.warning("pattern %r at %s is not supported (%s): any string is accepted there", pattern, path, exc)
            return self.add_rule(rule_name, self.primitive("string"))
        except PatternError as exc:
            raise SchemaError(f"{path}: invalid pattern {pattern!r}: {exc}") from None

    def integer(self, s: dict, rule_name: str, path: str) -> str:
        body = integer_body(s, path)
        if body is None:
            return self.primitive("root" if rule_name == "root" else "integer", "integer")
        return self.add_rule(rule_name, f"({body})")

    def number(self, s: dict, rule_name: str, path: str) -> str:
        body = number_body(s, path)
        if body is None:
            return self.primitive("root" if rule_name == "root" else "number", "number")
        return self.add_rule(rule_name, f"({body})")
