"""Our JSON Schema -> GBNF converter (chat/gbnf/json_schema.py) against llama.cpp's own
converter tests (tests/test-json-schema-to-grammar.cpp, extracted to data/), then by what
its grammars accept (tests/chat/gbnf_match.py): no raw control character in a string,
integer and number bounds exactly / soundly, patterns no wider than the regex; and, with
Hypothesis, random schemas whose grammars' random strings all parse and validate."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings

from edge_infer.chat import SchemaError, WRAPPERS, json_schema_grammar, tool_call_grammar
from edge_infer.chat.gbnf.values import FUNCTION_GEMMA, PYTHON, arguments_grammar
from tests.chat.gbnf_match import Grammar
from tests.chat.schema_strategies import schemas

DATA = json.loads((Path(__file__).parent / "data" / "llama_cpp_json_schema_cases.json").read_text())
CASES = {c["name"]: c for c in DATA["cases"]}
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\]|[^\s"\[]+')
_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "[": "[", "]": "]", "-": "-"}


def _literal(token: str) -> str:
    """A GBNF literal spelled one way (its text as JSON): "a\\-b" and "a-b" are one literal."""
    s, out, i = token[1:-1], [], 0
    while i < len(s):
        if s[i] == "\\" and s[i + 1] in "xuU":
            n = {"x": 2, "u": 4, "U": 8}[s[i + 1]]
            out.append(chr(int(s[i + 2:i + 2 + n], 16)))
            i += 2 + n
        elif s[i] == "\\":
            out.append(_ESCAPES[s[i + 1]])
            i += 2
        else:
            out.append(s[i])
            i += 1
    return json.dumps("".join(out), ensure_ascii=False)


def normalised(grammar_lines) -> dict[str, str]:
    """name -> body, with spacing and the spelling of literals made one (rule order is a dict's)."""
    rules = {}
    for line in grammar_lines:
        if line.strip():
            name, _, body = line.partition(" ::= ")
            rules[name.strip()] = " ".join(_literal(t) if t.startswith('"') else t for t in _TOKEN.findall(body))
    return rules


@pytest.mark.parametrize("name", sorted(CASES))
def test_llama_cpp_cases_come_out_identical_or_differ_as_listed(name):
    case = CASES[name]
    if case["ours"] == "refused":
        with pytest.raises(SchemaError):
            json_schema_grammar(case["schema"])
        return
    ours = normalised(json_schema_grammar(case["schema"]).splitlines())
    if case["ours"] == "identical":
        assert ours == normalised(case["grammar"])
    else:  # listed as different on purpose: it must still be, and say why
        assert case["reason"] and ours != normalised(case["grammar"])


def test_the_case_counts_are_what_the_note_says():
    counts = {k: sum(c["ours"] == k for c in DATA["cases"]) for k in ("identical", "differs", "refused")}
    assert counts == {"identical": 67, "differs": 11, "refused": 3} and len(DATA["cases"]) == 81


NAME_COUNTRY = {"type": "object", "properties": {"name": {"type": "string"}, "country": {"type": "string"}},
                "required": ["name", "country"]}
CONTROLS = [chr(c) for c in range(0x20)] + ["\x7f"]


@pytest.mark.parametrize("schema", [
    NAME_COUNTRY, {"type": "string", "maxLength": 8}, {"type": "string", "pattern": "^.{1,8}$"},
    {"type": "string", "pattern": "^[^,]+$"}, {"type": "object", "additionalProperties": {"type": "string"}},
    {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "string"}},
    {"type": "object"}, {},
])
def test_a_raw_control_character_never_fits_a_string_and_its_escape_does(schema):
    g = Grammar(json_schema_grammar(schema))

    def text(s: str, raw: bool) -> str:
        inner = s if raw else json.dumps(s)[1:-1]
        if schema is NAME_COUNTRY:
            return f'{{"name": "O{inner}slo", "country": "Norway"}}'
        if "additionalProperties" in schema or schema.get("type") == "object":
            return f'{{"k{inner}": "v{inner}"}}'
        return f'"a{inner}b"'

    for ch in CONTROLS:
        assert not g.accepts(text(ch, raw=True)), repr(ch)
        if "pattern" not in schema:  # "." and [^,] take no escapes: their text stays plain
            assert g.accepts(text(ch, raw=False)), repr(ch)
    assert g.accepts(text("\u00e9\u4e2d\U0001f600", raw=True))  # non-ASCII stays raw, as JSON allows


def test_a_lone_backslash_or_quote_cannot_open_an_extra_key():
    g = Grammar(json_schema_grammar({"type": "object", "properties": {"a": {"type": "integer"}},
                                     "additionalProperties": {"type": "integer"}}))
    assert g.accepts('{"b": 1}') and g.accepts('{"a": 1, "ab": 2}')
    assert not g.accepts('{"a": 1, "a": 2}')  # a declared key is not an extra one
    assert not g.accepts('{"\\": 1}') and not g.accepts('{"\n": 1}')


BOUNDS = [(0, 9), (None, 30), (-5, None), (100, None), (105, None), (2030, None), (-123, 42), (15, 300),
          (None, -5), (-10, -3), (1, 1), (0, None), (None, 0), (-1000, 1000), (999, 1001), (7, None)]


@pytest.mark.parametrize("lo, hi", BOUNDS)
def test_an_integer_range_accepts_exactly_its_integers(lo, hi):
    schema = {"type": "integer", **({"minimum": lo} if lo is not None else {}),
              **({"maximum": hi} if hi is not None else {})}
    g = Grammar(json_schema_grammar(schema))
    wrong = [n for n in range(-2500, 2500) if g.accepts(str(n)) != ((lo is None or n >= lo) and (hi is None or n <= hi))]
    assert wrong == [], wrong[:10]
    assert not any(g.accepts(t) for t in ("007", "00", "-05", "-0012", "1.0", "-", "+1"))  # JSON's integers only


def test_exclusive_and_fractional_integer_bounds_move_inwards():
    g = Grammar(json_schema_grammar({"type": "integer", "exclusiveMinimum": 0, "maximum": 9.5}))
    assert [n for n in range(-5, 15) if g.accepts(str(n))] == list(range(1, 10))
    g = Grammar(json_schema_grammar({"type": "integer", "minimum": 0, "exclusiveMinimum": 3, "exclusiveMaximum": 6}))
    assert [n for n in range(-5, 15) if g.accepts(str(n))] == [4, 5]  # the stricter of both


NUMBER_TEXTS = sorted({f"{n}{f}" for n in range(-12, 13) for f in ("", ".5", ".25", ".0", ".999", ".05")} |
                      {"-0.5", "-0.25", "1e2", "-1e2", "0.001"})


@pytest.mark.parametrize("bounds", [
    {"minimum": 0}, {"exclusiveMinimum": 0}, {"maximum": 2.5}, {"exclusiveMaximum": -1},
    {"minimum": -3.5, "maximum": 7.25}, {"exclusiveMinimum": -1, "exclusiveMaximum": 0},
    {"minimum": 1, "exclusiveMaximum": 10}, {"exclusiveMinimum": 0, "exclusiveMaximum": 1},
])
def test_a_bounded_number_writes_only_numbers_within_and_every_integer_within(bounds):
    g = Grammar(json_schema_grammar({"type": "number", **bounds}))
    validator = jsonschema.Draft202012Validator({"type": "number", **bounds})
    for t in NUMBER_TEXTS:
        ok = validator.is_valid(float(t))
        if g.accepts(t):
            assert ok, t
        elif ok and re.fullmatch(r"-?\d+", t) and t != "-0":
            pytest.fail(f"the integer {t} is within {bounds} and refused")


PATTERN_STRINGS = ["", "a", "ab", "abc", "a-b", "A", "B", "AB", "Hello", "H", "123-4567", "12-4567", "bob@host.com",
                   '"', "\\", "a\\b", 'a"b', "a\nb", "x y", "x\ty", "7", "foobaz", "zab", "abz", "a,b", "é中"]


@pytest.mark.parametrize("pattern", [
    r"^abc?d*efg+(hij)?kl$", r"^[a-z\-]+$", r"^a\-b$", r'^"$', r"^\d{3}-\d{4}$", r"^\w+@\w+\.com$", r"[0-9]+",
    r"^A|B|C|D$", r"^(?:foo|bar)baz$", r"^[^,]+$", r"^.{2,4}$", r"^a\\b$", r"^[ -~]{1,3}$", r"^x\sy$", r"ab$",
    r"^ab", r"^(?P<y>\d{2})-(\d)$", r"^[\]a]+$", r"^\S+$", r"^[^\d]+$", r"^$", r"^(a|b)*c?$", r"^\x41\u0042?$",
])
def test_a_pattern_grammar_writes_only_strings_the_regex_matches(pattern):
    g = Grammar(json_schema_grammar({"type": "string", "pattern": pattern}))
    accepted = [s for s in PATTERN_STRINGS if g.accepts(json.dumps(s, ensure_ascii=False))]
    assert all(re.search(pattern, s) for s in accepted), [s for s in accepted if not re.search(pattern, s)]
    plain = [s for s in PATTERN_STRINGS if re.search(pattern, s) and not re.search(r'["\\\x00-\x1f]', s)]
    if pattern.startswith("^") and pattern.endswith("$") and "|" not in pattern:
        assert set(plain) <= set(accepted)  # and, where JSON needs no escape, all of them


@pytest.mark.parametrize("schema, words", [
    ({"type": "kaboom"}, "unrecognized type"),
    ({"type": "string", "pattern": "^(a$"}, "invalid pattern"),
    ({"type": "string", "pattern": "^a{3,1}$"}, "minimum is above the maximum"),
    ({"type": "string", "minLength": 5, "maxLength": 2}, "minLength 5 is above maxLength 2"),
    ({"type": "string", "maxLength": 5000}, "maxLength 5000 is above 1000"),
    ({"type": "array", "minItems": 3, "maxItems": 1}, "minItems 3 is above maxItems 1"),
    ({"type": "array", "maxItems": -1}, "maxItems must be a non-negative integer"),
    ({"type": "integer", "minimum": 10, "maximum": 2}, "no integer is within"),
    ({"type": "integer", "minimum": "1"}, "minimum must be a number"),
    ({"type": "number", "minimum": 0.2, "maximum": 0.7}, "leave no number"),
    ({"properties": {"a": {"$ref": "#/$defs/nope"}}}, "#/properties/a: cannot resolve $ref #/$defs/nope"),
    ({"$ref": "https://example.com/s.json"}, "only references into the same document"),
    ({"$ref": "#"}, "left recursion"),
    ({"type": "object", "properties": {"next": {"$ref": "#"}}, "required": ["next"]}, "never produce a finite"),
    ({"enum": []}, "enum must be a non-empty array"),
    ({"anyOf": []}, "non-empty array"),
    ({"allOf": [{"type": "string"}, {"minLength": 2}]}, "allOf is supported for objects and enums"),
    ({"allOf": [{"enum": ["a"]}, {"enum": ["b"]}]}, "no value in common"),
    ({"type": "object", "properties": {}, "required": ["x"], "additionalProperties": False}, "'x'"),
    ({"type": "object", "properties": 3}, "properties must be an object"),
    (False, "allows no value"),
    ({"type": "object", "properties": {"a": []}}, "#/properties/a: a schema must be an object"),
])
def test_a_schema_without_a_grammar_is_refused_saying_where_and_why(schema, words):
    with pytest.raises(SchemaError, match=re.escape(words)):
        json_schema_grammar(schema)


def test_unsupported_regex_features_fall_back_to_any_string_as_llama_cpp_does(caplog):
    g = json_schema_grammar({"type": "string", "pattern": r"^(?=a)\w+$"})
    assert "root ::= string" in g and "not supported" in caplog.text


def test_recursion_through_refs_and_integers_in_range():
    schema = {"$defs": {"node": {"type": "object", "properties": {
        "v": {"type": "integer", "minimum": 0, "maximum": 9}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
        "required": ["v"], "additionalProperties": False}}, "$ref": "#/$defs/node"}
    g = Grammar(json_schema_grammar(schema))
    assert g.accepts('{"v": 1, "kids": [{"v": 2}, {"v": 3, "kids": []}]}')
    assert not g.accepts('{"v": 12}') and not g.accepts('{"v": 1, "x": 2}')


def test_tool_call_arguments_in_every_family_refuse_raw_control_characters():
    """The mistral test's flake: json.loads 'Invalid control character' in a forced call's
    arguments. Every family's grammar now writes only escapes there."""
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    tool = {"type": "function", "function": {"name": "f", "parameters": schema}}
    for family, (ok, raw) in {
        "hermes": ('<tool_call>\n{"name": "f", "arguments": {"city": "O\\tslo"}}\n</tool_call>', "\t"),
        "mistral": ('[TOOL_CALLS][{"name": "f", "arguments": {"city": "O\\tslo"}}]', "\t"),
        "gemma": ('```tool_code\nprint(f(city="O\\tslo"))\n```', "\t"),
    }.items():
        g = Grammar(tool_call_grammar([tool], "required", WRAPPERS[family]))
        assert g.accepts(ok), family
        assert not g.accepts(ok.replace("\\t", raw)), family
    assert not Grammar(arguments_grammar(schema, PYTHON)).accepts('city="a\rb"')
    fg = Grammar(arguments_grammar(schema, FUNCTION_GEMMA))
    assert fg.accepts("{city:<escape>two\nlines<escape>}") and not fg.accepts("{city:<escape>a\x00b<escape>}")


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(schemas())
def test_every_string_a_random_schemas_grammar_writes_is_json_it_accepts(schema):
    g = Grammar(json_schema_grammar(schema))
    validator = jsonschema.Draft202012Validator(schema)
    rng = random.Random(json.dumps(schema, sort_keys=True))
    for _ in range(8):
        text = g.sample(rng)
        value = json.loads(text)  # strict: a raw control character in a string fails here
        assert validator.is_valid(value), (text, list(validator.iter_errors(value))[:1])
