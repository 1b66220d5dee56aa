"""A string schema's `pattern` (a regular expression) as GBNF for the JSON string's text.

Follows llama.cpp's _pattern_to_rule (groups, alternation, classes, `.`, * + ? {m,n},
repeated items as sub-rules, literals merged), with what JSON needs on top: the rule
describes the string as written inside its quotes, so a `"`, a `\\` or a control
character the regex matches is written as its escape, and `.` and negated classes never
match one raw (llama.cpp's let a raw quote or newline end or break the string). Also ours:
\\d \\w \\s and their negations, escaped punctuation anywhere, named groups, and a pattern
without ^ or $ matches inside a longer string (JSON Schema's search semantics) instead of
being dropped. Lookaround, backreferences, \\b and inline flags have no grammar: the caller
falls back to any string (llama.cpp's choice, with a warning); a regex that is not valid
is a SchemaError.
"""

from __future__ import annotations

from edge_infer.chat.gbnf.json_rules import literal, repetition

MAX_DEPTH = 100
MAX_CODE_POINT = 0x10FFFF
UNSAFE = ((0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C), (0x7F, 0x7F))  # JSON writes these escaped
UNSAFE_CLASS = '"\\\\\\x7F\\x00-\\x1F'  # the same, inside a GBNF class
_SHORT_ESCAPES = {"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", '"': '\\"', "\\": "\\\\"}
_CHAR_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f", "v": "\v", "0": "\0"}
_SHORTHANDS = {"d": [(0x30, 0x39)], "w": [(0x61, 0x7A), (0x41, 0x5A), (0x30, 0x39), (0x5F, 0x5F)],
               "s": [(0x09, 0x0D), (0x20, 0x20)]}


class PatternError(ValueError):
    """Not a valid regular expression."""


class Unsupported(Exception):
    """A valid regular expression with no grammar equivalent."""


def json_escaped(text: str) -> str:
    """The text as it stands between a JSON string's quotes."""
    out = []
    for ch in text:
        if ch in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out)


def _class_char(cp: int) -> str:
    ch = chr(cp)
    if 0xD800 <= cp <= 0xDFFF or cp > 0xFFFF:  # not writable raw (surrogates) or long: escaped
        return f"\\U{cp:08X}"
    if ch in "-]\\[^\"" or cp < 0x20 or cp == 0x7F:
        return {"-": "\\-", "]": "\\]", "\\": "\\\\", "[": "\\[", '"': '\\"'}.get(ch, f"\\x{cp:02X}")
    return ch


def _render(items: list[tuple[int, int]]) -> str:
    return "".join(_class_char(a) if a == b else f"{_class_char(a)}-{_class_char(b)}" for a, b in items)


def _complement(items: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out, at = [], 0
    for a, b in sorted(items):
        if a > at:
            out.append((at, a - 1))
        at = max(at, b + 1)
    if at <= MAX_CODE_POINT:
        out.append((at, MAX_CODE_POINT))
    return out


def _split_unsafe(items: list[tuple[int, int]]) -> tuple[list[tuple[int, int]], list[int]]:
    """(the safe intervals, the unsafe code points) of a set of intervals."""
    safe, unsafe = [], []
    for a, b in items:
        for u0, u1 in UNSAFE:
            if a <= u1 and b >= u0:
                unsafe += range(max(a, u0), min(b, u1) + 1)
        pieces = [(a, b)]
        for u0, u1 in UNSAFE:
            pieces = [p for x, y in pieces for p in ((x, min(y, u0 - 1)), (max(x, u1 + 1), y)) if p[0] <= p[1]]
        safe += pieces
    return safe, sorted(set(unsafe))


def char_set(items: list[tuple[int, int]], negated: bool) -> str:
    """A class as GBNF for JSON text. Negated: its characters that need no escape. Positive:
    as written when it holds no character JSON escapes, else its plain part and the escapes."""
    if negated:
        return f"[^{_render(items)}{UNSAFE_CLASS}]"
    safe, unsafe = _split_unsafe(items)
    if not unsafe:
        return f"[{_render(items)}]"
    alts = ([f"[{_render(safe)}]"] if safe else []) + [literal(json_escaped(chr(u))) for u in unsafe]
    return "(" + " | ".join(alts) + ")"


class PatternParser:
    """One pattern -> one rule body; `add_rule(name, body) -> name` holds sub-rules and
    `dot() -> name` gives the rule for `.` (added where a pattern uses one)."""

    def __init__(self, body: str, name: str, add_rule, dot: str):
        self.p, self.i, self.name, self.add_rule, self.dot = body, 0, name, add_rule, dot
        self.depth = 0
        self.sub_ids: dict[str, str] = {}

    def fail(self, why: str):
        raise PatternError(why)

    def parse(self) -> str:
        out = self.sequence()
        if self.depth:
            self.fail("unbalanced parentheses")
        return out

    def sequence(self) -> str:
        """Items up to a ')' or the end; each is [kind, text, quantified]; kind 'lit' (text
        not yet escaped), 'rule' (GBNF) or '|'."""
        seq: list[list] = []
        p = self.p
        while self.i < len(p):
            c = p[self.i]
            if c == ")":
                self.i += 1
                if self.depth == 0:
                    self.fail("unbalanced parentheses")
                self.depth -= 1
                return self.join(seq)
            if c in "*+?{":
                self.quantify(seq, c)
                continue
            self.i += 1
            if c == ".":
                seq.append(["rule", self.dot(), False])
            elif c == "(":
                self.group_opening()
                self.depth += 1
                if self.depth > MAX_DEPTH:
                    raise Unsupported("pattern nesting too deep")
                seq.append(["rule", f"({self.sequence()})", False])
            elif c in "^$":
                raise Unsupported("anchor inside the pattern")
            elif c == "[":
                seq.append(["rule", self.char_class(), False])
            elif c == "|":
                seq.append(["|", "|", False])
            elif c == "\\":
                seq.append(self.escape())
            else:  # a stray ] or } is itself, as in Python's and JavaScript's regexes
                seq.append(["lit", c, False])
        return self.join(seq)

    def group_opening(self) -> None:
        p, i = self.p, self.i
        if not p.startswith("?", i):
            return
        if p.startswith("?:", i):
            self.i += 2
            return
        for named in ("?P<", "?<"):
            end = p.find(">", i)
            if p.startswith(named, i) and not p.startswith(("?<=", "?<!"), i) and end > 0:
                self.i = end + 1  # a named group matches as a plain one (no backreferences here)
                return
        raise Unsupported("unsupported group syntax (lookaround, flags)")

    def quantify(self, seq: list[list], c: str) -> None:
        if not seq or seq[-1][0] == "|":
            self.fail("nothing to repeat")
        last = seq[-1]
        if c == "{":
            end = self.p.find("}", self.i)
            if end < 0:
                raise Unsupported("unterminated curly brackets")
            nums = self.p[self.i + 1:end].split(",")
            self.i = end + 1
            if len(nums) not in (1, 2) or not all(n.isdigit() or (n == "" and len(nums) == 2) for n in nums):
                raise Unsupported("wrong numbers in curly brackets")
            lo = int(nums[0] or 0)
            hi = lo if len(nums) == 1 else (int(nums[1]) if nums[1] else None)
            if hi is not None and hi < lo:
                self.fail(f"{{{lo},{hi}}}: the minimum is above the maximum")
            if last[0] == "lit":
                item = literal(json_escaped(last[1]))
            else:
                item = self.sub_ids.get(last[1])
                if item is None:
                    key = f"{self.name}-{len(self.sub_ids) + 1}"
                    item = self.sub_ids[last[1]] = self.add_rule(key, last[1])
            seq[-1] = ["rule", repetition(item, lo, hi), True]
            return
        self.i += 1
        if last[2]:
            if c == "?":
                return  # lazy: the same strings
            raise Unsupported("possessive or repeated quantifier")
        text = literal(json_escaped(last[1])) if last[0] == "lit" else last[1]
        seq[-1] = ["rule", text + c, True]

    def escape(self) -> list:
        p = self.p
        if self.i >= len(p):
            self.fail("trailing backslash")
        c = p[self.i]
        self.i += 1
        if c.lower() in _SHORTHANDS:
            return ["rule", char_set(_SHORTHANDS[c.lower()], c.isupper()), False]
        return ["lit", self.escaped_char(c), False]

    def escaped_char(self, c: str) -> str:
        """The character an escape (after its backslash) stands for."""
        if c in _CHAR_ESCAPES:
            return _CHAR_ESCAPES[c]
        if c in "xu":
            n = 2 if c == "x" else 4
            digits = self.p[self.i:self.i + n]
            if len(digits) != n or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise Unsupported(f"unsupported escape \\{c}{digits}")
            self.i += n
            return chr(int(digits, 16))
        if c.isalnum():
            raise Unsupported(f"unsupported escape \\{c}")
        return c  # escaped punctuation is itself

    def char_class(self) -> str:
        p = self.p
        negated = p.startswith("^", self.i)
        self.i += negated
        items: list[tuple[int, int]] = []
        first = True
        while True:
            if self.i >= len(p):
                self.fail("unterminated character class")
            c = p[self.i]
            if c == "]" and not first:
                self.i += 1
                break
            first = False
            self.i += 1
            if c == "\\":
                if self.i >= len(p):
                    self.fail("unterminated character class")
                e = p[self.i]
                self.i += 1
                if e.lower() in _SHORTHANDS:
                    part = _SHORTHANDS[e.lower()]
                    items += _complement(part) if e.isupper() else part
                    continue
                c = "\b" if e == "b" else self.escaped_char(e)
            lo = ord(c)
            if p.startswith("-", self.i) and self.i + 1 < len(p) and p[self.i + 1] != "]":
                self.i += 1
                d = p[self.i]
                self.i += 1
                if d == "\\":
                    if self.i >= len(p):
                        self.fail("unterminated character class")
                    self.i += 1
                    d = self.escaped_char(p[self.i - 1])
                if ord(d) < lo:
                    self.fail(f"bad character range {c}-{d}")
                items.append((lo, ord(d)))
            else:
                items.append((lo, lo))
        return char_set(items, negated)

    def join(self, seq: list[list]) -> str:
        """The items as a GBNF sequence, neighbouring unquantified literals merged."""
        out, text = [], ""
        for kind, body, quantified in seq:
            if kind == "lit" and not quantified:
                text += body
                continue
            if text:
                out.append(literal(json_escaped(text)))
                text = ""
            out.append(body)
        if text:
            out.append(literal(json_escaped(text)))
        return " ".join(out)


def anchors(pattern: str) -> tuple[str, bool, bool]:
    """(the pattern without its outer anchors, anchored at the start, at the end)."""
    start = pattern.startswith("^")
    body = pattern[1:] if start else pattern
    backslashes = len(body[:-1]) - len(body[:-1].rstrip("\\")) if body.endswith("$") else 0
    end = body.endswith("$") and backslashes % 2 == 0
    return (body[:-1] if end else body), start, end
