"""An object schema's members as GBNF: properties in schema order, the required ones first,
any subset of the optional ones after them (each once, in order), and extra keys where
additionalProperties lets them in (llama.cpp's _build_object_rule and _not_strings).

An extra key must not be a declared one: a trie over the declared keys as JSON writes them
says where a key leaves them. Unlike llama.cpp's, the character that leaves the trie is
never a raw quote, backslash or control character (llama.cpp's `[^"a]` let a raw newline or
a lone backslash start a key, which is not JSON, or an escape spell a declared key).
"""

from __future__ import annotations

import re
from typing import Protocol

from edge_infer.chat.gbnf.json_pattern import UNSAFE_CLASS, json_escaped
from edge_infer.chat.gbnf.json_rules import SchemaError, json_text, literal

EXTRA = object()  # the additionalProperties member, among the optional ones (always last)


class Converter(Protocol):
    def kind(self, schema, path: str) -> str: ...
    def target(self, ref, path: str) -> tuple: ...
    def constant(self, value, path: str) -> str: ...
    def visit(self, schema, name: str, path: str) -> str: ...
    def add_rule(self, name: str, body: str) -> str: ...
    def primitive(self, name: str, kind: str | None = None) -> str: ...
    def is_any(self, schema, path: str) -> bool: ...


_PIECES = re.compile(r"\\u[0-9a-fA-F]{4}|\\.|.", re.S)


def _class_char(ch: str) -> str:
    return "\\x5E" if ch == "^" else "\\" + ch if ch in '-]\\["' else ch


def not_keys(keys: list[str], char: str) -> str:
    """A JSON string that is none of `keys` (as a GBNF body)."""
    trie: dict = {}
    for key in keys:
        node = trie
        for piece in _PIECES.findall(json_escaped(key)):  # an escape is one step: never left halfway
            node = node.setdefault(piece, {})
        node[None] = True  # a key ends here
    out = ['["] ( ']

    def visit(node: dict) -> None:
        rejects = ""
        children = sorted(k for k in node if k is not None)
        for n, piece in enumerate(children):
            child = node[piece]
            if len(piece) == 1:
                rejects += _class_char(piece)
            out.append(("" if n == 0 else " | ") + (f"[{_class_char(piece)}]" if len(piece) == 1 else literal(piece)))
            if any(k is not None for k in child):
                out.append(" (")
                visit(child)
                out.append(")")
            else:
                out.append(f" {char}+")
        if children:
            out.append(f" | [^{UNSAFE_CLASS}{rejects}] {char}*")
        else:  # ours: only "" declared (llama.cpp's empty group let "" in again)
            out.append(f"{char}+")

    visit(trie)
    out.append(" )" + ("" if None in trie else "?") + ' ["]')
    return "".join(out)


def object_rule(conv: Converter, props: list[tuple[str, object, str]], required: set[str], name: str,
                extra, extra_path: str = "") -> str:
    """props: (key, schema, path) in schema order; extra: the additionalProperties schema,
    None where no other key is allowed."""
    sep = "-" if name else ""
    kv: dict = {}
    required_keys, optional_keys = [], []
    for key, schema, path in props:
        # llama.cpp names an empty key's value rule "", which is "root": the grammar then
        # generated that value instead of the object. "-" keeps it apart.
        value = conv.visit(schema, f"{name}{sep}{key}" or "-", path)
        kv[key] = conv.add_rule(f"{name}{sep}{key}-kv", f"{literal(json_text(key))} space \":\" space {value}")
        (required_keys if key in required else optional_keys).append(key)
    if extra is not None:
        sub = f"{name}{sep}additional"
        value = conv.primitive("value") if conv.is_any(extra, extra_path) else \
            conv.visit(extra, f"{sub}-value", extra_path)
        keys = [key for key, _, _ in props]
        key_rule = conv.add_rule(f"{sub}-k", not_keys(keys, conv.primitive("char"))) if keys \
            else conv.primitive("string")
        kv[EXTRA] = conv.add_rule(f"{sub}-kv", f'{key_rule} ":" space {value}')
        optional_keys.append(EXTRA)
    if not required_keys and not optional_keys:
        return '"{" space "}"'
    rule = '"{" space ' + ' "," space '.join(kv[k] for k in required_keys)
    if optional_keys:
        rule += " ("
        if required_keys:
            rule += ' "," space ( '

        def rest(keys: list, first_optional: bool) -> str:
            """The optional members from keys[0] on, each at most once, in order."""
            k = keys[0]
            comma = f'( "," space {kv[k]} )'
            if first_optional:
                out = comma + ("*" if k is EXTRA else "?")
            else:
                out = kv[k] + (f" {comma}*" if k is EXTRA else "")
            if len(keys) > 1:  # EXTRA is last, so k is a key here
                out += " " + conv.add_rule(f"{name}{sep}{k}-rest", rest(keys[1:], True))
            return out

        rule += " | ".join(rest(optional_keys[i:], False) for i in range(len(optional_keys)))
        if required_keys:
            rule += " )"
        rule += " )?"
    return rule + ' space "}"'


def object_members(s: dict, path: str):
    """(properties as (key, schema, path), required keys, the additionalProperties schema or
    None where no other key may come), as common/json-schema.cpp's build_object reads them:
    without additionalProperties, an object with properties takes no other key."""
    props = s.get("properties", {})
    if not isinstance(props, dict):
        raise SchemaError(f"{path}: properties must be an object")
    required = s.get("required", [])
    required = {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()
    extra = s.get("additionalProperties", True if "properties" not in s else None)
    if extra is False:
        extra = None
    elif extra is not None and extra is not True and not isinstance(extra, dict):
        raise SchemaError(f"{path}: additionalProperties must be a boolean or a schema")
    members = [(k, v, f"{path}/properties/{k}") for k, v in props.items()]
    for key in sorted(required - props.keys()):  # ours: a required key the schema does not declare
        if extra is None:
            raise SchemaError(f"{path}: required property {key!r} is not among the properties and "
                              "additionalProperties does not allow it")
        members.append((key, extra, f"{path}/additionalProperties"))
    return members, required, extra


def all_of_members(conv: Converter, s: dict, path: str):
    """(the enum literals every part allows, or [], the merged properties, the required keys)
    of an allOf (llama.cpp's _visit_all_of: an anyOf part's alternatives add optional keys)."""
    parts = s["allOf"]
    if not isinstance(parts, list) or not parts:
        raise SchemaError(f"{path}/allOf: must be a non-empty array of schemas")
    props, required, counts, seen, declared = [], set(), {}, set(), {}

    def add(part, is_required: bool, where: str) -> None:
        kind = conv.kind(part, where)
        if kind == "ref":
            if part["$ref"] not in seen:
                seen.add(part["$ref"])
                add(conv.target(part["$ref"], where)[0], is_required, part["$ref"])
        elif kind == "object":
            members, own_required, _ = object_members(part, where)
            for key, schema, at in members:
                if key not in declared:
                    declared[key] = schema
                    props.append((key, schema, at))
                elif declared[key] != schema:  # ours: llama.cpp wrote the key twice
                    raise SchemaError(f"{at}: allOf declares property {key!r} twice, differently")
            required.update(k for k, _, _ in members if is_required or k in own_required)
        elif kind == "enum":
            for v in part["enum"]:
                lit = conv.constant(v, where)
                counts[lit] = counts.get(lit, 0) + 1
        elif kind != "any":  # ours: llama.cpp wrote an empty object for these
            raise SchemaError(f"{where}: allOf is supported for objects and enums, not a {kind}")

    for i, part in enumerate(parts):
        if conv.kind(part, f"{path}/allOf/{i}") == "anyOf":
            alts = part.get("oneOf", part.get("anyOf"))
            for j, alt in enumerate(alts if isinstance(alts, list) else []):
                add(alt, False, f"{path}/allOf/{i}/{j}")
        else:
            add(part, True, f"{path}/allOf/{i}")
    common = [lit for lit in sorted(counts) if counts[lit] == len(parts)]
    if counts and not common:
        raise SchemaError(f"{path}/allOf: its enums have no value in common")
    return common, props, required
