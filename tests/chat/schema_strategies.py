"""Hypothesis strategies for JSON schemas of the kinds structured output meets: objects
(required and optional keys, additionalProperties false / true / a schema, keys that need
escaping), arrays (item bounds, tuples), enums and consts (with quotes, backslashes, control
characters, non-ASCII), strings (lengths, patterns, formats), integers and numbers with
bounds, type lists, anyOf, allOf of objects, $ref into $defs (recursive ones too)."""

from __future__ import annotations

from hypothesis import strategies as st

KEYS = ["a", "b", "name", "city", "n", "x y", "é", "", 'q"uote', "back\\slash", "tab\there", "number", "root",
        "3", "a-b", "kv"]
TEXTS = ["red", "green", "a b", 'say "hi"', "back\\slash", "line\nbreak", "tab\t", "\x01ctl", "é中😀", ""]
PATTERNS = [r"^[A-Z][a-z]{1,8}$", r"^\d{3}-\d{4}$", r"^(red|green|blue)$", r"^[a-z]+(-[a-z]+)*$", r"[0-9]",
            r"^\w{2,6}@\w{2,6}\.(com|org)$", r'^say "[a-z]{1,4}"$', r"^.{1,5}$", r"^[^,;]{1,6}$", r"^x+$",
            r"^[A-F0-9]{4}$", r"^a\\b$"]
FORMATS = ["date", "time", "date-time", "uuid"]

scalars = st.one_of(st.sampled_from(TEXTS), st.integers(-1000, 1000), st.booleans(), st.none(),
                    st.sampled_from([0.5, -2.25, 1e-3]))


@st.composite
def _bounds(draw, numbers: bool) -> dict:
    """minimum / maximum, each inclusive or exclusive, at least 2 apart (room for a value)."""
    value = st.one_of(st.integers(-50, 50), st.sampled_from([-7.5, -0.5, 0.5, 2.25])) if numbers \
        else st.integers(-1200, 1200)
    lo = draw(st.none() | value)
    hi = draw(st.none() | (st.integers(2, 300).map(lambda d: lo + d) if lo is not None else value))
    out = {}
    if lo is not None:
        out["exclusiveMinimum" if draw(st.booleans()) else "minimum"] = lo
    if hi is not None:
        out["exclusiveMaximum" if draw(st.booleans()) else "maximum"] = hi
    return out


@st.composite
def _string(draw) -> dict:
    kind = draw(st.sampled_from(["plain", "length", "pattern", "format"]))
    s = {"type": "string"}
    if kind == "length":
        lo = draw(st.integers(0, 4))
        s["minLength"] = lo
        if draw(st.booleans()):
            s["maxLength"] = lo + draw(st.integers(0, 8))
    elif kind == "pattern":
        s["pattern"] = draw(st.sampled_from(PATTERNS))
    elif kind == "format":
        s["format"] = draw(st.sampled_from(FORMATS))
    return s


leaves = st.one_of(
    _string(),
    _bounds(numbers=False).map(lambda b: {"type": "integer", **b}),
    _bounds(numbers=True).map(lambda b: {"type": "number", **b}),
    st.just({"type": "boolean"}), st.just({"type": "null"}),
    st.lists(scalars, min_size=1, max_size=4).map(lambda v: {"enum": v}),
    scalars.map(lambda v: {"const": v}),
    st.sampled_from([["string", "null"], ["integer", "boolean"], ["number", "string"]]).map(lambda t: {"type": t}),
)


@st.composite
def _object(draw, child) -> dict:
    keys = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=4, unique=True))
    props = {k: draw(child) for k in keys}
    s = {"type": "object", "properties": props}
    required = [k for k in keys if draw(st.booleans())]
    if required:
        s["required"] = required
    extra = draw(st.sampled_from(["absent", "false", "true", "schema"]))
    if extra != "absent":
        s["additionalProperties"] = {"false": False, "true": True}.get(extra) if extra != "schema" else draw(leaves)
    return s


@st.composite
def _array(draw, child) -> dict:
    if draw(st.integers(0, 4)) == 0:
        return {"type": "array", "prefixItems": draw(st.lists(child, min_size=1, max_size=3))}
    s = {"type": "array", "items": draw(child)}
    lo = draw(st.integers(0, 2))
    if lo:
        s["minItems"] = lo
    if draw(st.booleans()):
        s["maxItems"] = lo + draw(st.integers(0, 2))
    return s


def _all_of(parts) -> dict:
    """allOf of two objects with different keys (a key in both, differently, is refused)."""
    first, second = ({k: v for k, v in p.items() if k != "additionalProperties"} for p in parts)
    second["properties"] = {k: v for k, v in second["properties"].items() if k not in first["properties"]}
    if "required" in second:
        second["required"] = [k for k in second["required"] if k in second["properties"]]
    return {"allOf": [first, second]}


def _extend(child):
    return st.one_of(
        _object(child), _array(child),
        st.lists(child, min_size=2, max_size=3).map(lambda alts: {"anyOf": alts}),
        st.tuples(_object(leaves), _object(leaves)).map(_all_of),
    )


values = st.recursive(leaves, _extend, max_leaves=8)

TREE = {"$defs": {"node": {"type": "object", "properties": {
    "v": {"type": "integer", "minimum": 0, "maximum": 99},
    "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
    "required": ["v"], "additionalProperties": False}}, "$ref": "#/$defs/node"}


@st.composite
def schemas(draw) -> dict:
    """A top-level schema: mostly an object, sometimes with its parts behind $ref."""
    shape = draw(st.sampled_from(["object", "object", "object", "ref", "value", "tree"]))
    if shape == "tree":
        return TREE
    if shape == "ref":
        part = draw(values)
        return {"type": "object", "properties": {"item": {"$ref": "#/$defs/part"}, "more": {"type": "array",
                "items": {"$ref": "#/$defs/part"}, "maxItems": 2}}, "required": ["item"],
                "additionalProperties": False, "$defs": {"part": part}}
    if shape == "value":
        return draw(values)
    return draw(_object(values))
