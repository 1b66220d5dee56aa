"""GBNF text -> the flat rules llama.cpp would build from it, or GrammarError.

Follows llama-grammar.cpp's syntax (parse_rule / parse_alternates / parse_sequence /
parse_char / parse_space / parse_token) and refuses, with where and why, what that parser
takes but then chokes on: inverted repetition bounds (unsigned, so it makes rules without
end), character classes matching nothing, code points beyond Unicode. Pure Python, no
llama_cpp import, so it can be tested alone. grammar_check runs the whole-grammar checks.
"""

from __future__ import annotations

from dataclasses import dataclass


class GrammarError(ValueError):
    """A grammar llama.cpp must not be given; the message says why, in one line."""


MAX_CODE_POINT = 0x10FFFF
# Nesting llama.cpp can parse without overflowing a thread's stack (30,000 levels crashed the
# server); converters write up to 1000 (json_schema_to_gbnf for maxLength 1000).
MAX_DEPTH = 1024
TERM, EPS = -1, -2  # symbols: a terminal that consumes input, an empty literal ""
_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")
_DIGITS = frozenset("0123456789")
_HEX = frozenset("0123456789abcdefABCDEF")
_HEX_SIZE = {"x": 2, "u": 4, "U": 8}
_SIMPLE_ESCAPES = {"t": "\t", "r": "\r", "n": "\n", "\\": "\\", '"': '"', "[": "[", "]": "]", "-": "-"}


@dataclass(frozen=True)
class TokenRef:
    """A <[id]> or <text> token in a grammar (text keeps its brackets, as llama.cpp reads it)."""
    negated: bool
    token_id: int | None
    text: str | None
    where: str


class GbnfParser:
    """Text -> flat rules: alts[id] is a list of sequences of symbols (rule ids, TERM, EPS).

    Groups and repetitions become anonymous rules as in llama.cpp, so grammar_check
    sees the grammar llama.cpp will run; owner[id] names the rule each one came from.
    """

    def __init__(self, text: str, max_repeat: int, max_rules: int, max_elements: int):
        self.s, self.i = text, 0
        self.max_repeat, self.max_rules, self.max_elements = max_repeat, max_rules, max_elements
        self.ids: dict[str, int] = {}   # named rules, defined or only referenced
        self.alts: list[list[list[int]]] = []
        self.owner: list[str] = []
        self.defined: set[int] = set()
        self.first_user: dict[int, str] = {}  # undefined-rule messages name who used it
        self.loops: set[int] = set()  # the S' ::= S S' | rules of unbounded repetitions
        self.elements = 0
        self.tokens: list[TokenRef] = []  # <...> references, checked against a vocabulary later

    def fail(self, what: str, at: int | None = None):
        raise GrammarError(f"{what} at {self._where(self.i if at is None else at)}")

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.s[j] if j < len(self.s) else ""

    def new_rule(self, owner: str, alts=None) -> int:
        self.alts.append(alts or [])
        self.owner.append(owner)
        return len(self.alts) - 1

    def named(self, name: str, user: str) -> int:
        if name not in self.ids:
            if len(self.ids) >= self.max_rules:
                self.fail(f"more than {self.max_rules} rules")
            self.ids[name] = self.new_rule(name)
            self.first_user[self.ids[name]] = user
        return self.ids[name]

    def grow(self, n: int) -> None:
        self.elements += n
        if self.elements > self.max_elements:
            self.fail(f"grammar too large (over {self.max_elements} elements once repetitions are expanded)")

    def space(self, newline_ok: bool) -> None:
        s, i, n = self.s, self.i, len(self.s)
        while i < n:
            if s[i] == "#":
                while i < n and s[i] not in "\r\n":
                    i += 1
            elif s[i] in " \t" or (newline_ok and s[i] in "\r\n"):
                i += 1
            else:
                break
        self.i = i

    def _run_of(self, chars: frozenset, what: str) -> str:
        start = self.i
        while self.peek() in chars:
            self.i += 1
        if self.i == start:
            self.fail(f"expecting {what}")
        return self.s[start:self.i]

    def name(self) -> str:
        return self._run_of(_WORD, "a rule name")

    def integer(self) -> int:
        digits = self._run_of(_DIGITS, "an integer")
        return int(digits) if len(digits) <= 12 else 10 ** 12  # huge is huge; skip bignum parsing

    def char(self) -> int:
        c = self.peek()
        if not c:
            self.fail("unexpected end of input")
        if c != "\\":
            self.i += 1
            return ord(c)
        start, e = self.i, self.peek(1)
        if e in _HEX_SIZE:
            size = _HEX_SIZE[e]
            digits = self.s[self.i + 2:self.i + 2 + size]
            if len(digits) != size or not all(d in _HEX for d in digits):
                self.fail(f"expecting {size} hex digits after \\{e}")
            self.i += 2 + size
            cp = int(digits, 16)
            if cp > MAX_CODE_POINT:
                self.fail(f"code point {_show(cp)} is beyond Unicode (max \\U0010FFFF)", start)
            return cp
        if e and e in _SIMPLE_ESCAPES:
            self.i += 2
            return ord(_SIMPLE_ESCAPES[e])
        self.fail(f"unknown escape '\\{e}'")

    def parse(self) -> None:
        self.space(True)
        while self.i < len(self.s):
            self.rule()

    def rule(self) -> None:
        start = self.i
        name = self.name()
        self.space(False)
        if not self.s.startswith("::=", self.i):
            self.fail(f"expecting '::=' after rule name '{name}'")
        self.i += 3
        self.space(True)
        rid = self.named(name, name)
        if rid in self.defined:
            self.fail(f"rule '{name}' is defined twice", start)
        self.defined.add(rid)
        self.alts[rid] = self.alternates(name)
        c = self.peek()
        if c == "\r":
            self.i += 2 if self.peek(1) == "\n" else 1
        elif c == "\n":
            self.i += 1
        elif c:
            self.fail(f"unexpected {c!r} (expecting newline or end)")
        self.space(True)

    def alternates(self, owner: str) -> list[list[int]]:
        """One rule's body. Open groups sit on an explicit stack, not Python's: converters
        nest them a thousand deep (json_schema_to_gbnf writes maxLength 1000 that way)."""
        opened: list[tuple[list, list, int]] = []  # enclosing (alternates, sequence, '(' at)
        alts: list[list[int]] = []
        seq: list[int] = []
        size = 0  # elements of the last item: what a following repetition copies
        while True:
            c = self.peek()
            if c == "(":
                if len(opened) >= MAX_DEPTH:  # llama.cpp's parser recurses per level: its C stack
                    self.fail(f"groups nested more than {MAX_DEPTH} deep")
                opened.append((alts, seq, self.i))
                self.i += 1
                self.space(True)
                alts, seq, size = [], [], 0
                continue
            grown = self.item(owner, seq, size, nested=bool(opened))
            if grown is not None:
                size = grown
                continue
            alts.append(seq)
            seq, size = [], 0
            if c == "|":
                self.i += 1
                self.space(True)
                continue
            self.grow(len(alts))  # an ALT or END element each
            if not opened:
                return alts
            if not c:
                self.fail("unclosed '('", opened[-1][2])
            if c != ")":
                self.fail("expecting ')'")
            self.i += 1
            group = self.new_rule(owner, alts)
            alts, seq, _ = opened.pop()
            seq.append(group)
            size = 1
            self.space(bool(opened))
            self.grow(size)

    def item(self, owner: str, seq: list[int], size: int, nested: bool) -> int | None:
        """Parse one item (or a repetition of the last) onto seq; its size, None if none here."""
        c, start = self.peek(), self.i
        if not c:
            return None
        if c == '"':
            self.i += 1
            size = 0
            while self.peek() != '"':
                if not self.peek():
                    self.fail("unterminated string literal", start)
                if self.char() == 0:
                    self.fail("NUL (\\x00) can never be generated", start)
                size += 1
            self.i += 1
            seq.append(TERM if size else EPS)
        elif c == "[":
            size = self.char_class()
            seq.append(TERM)
        elif c in "<!":
            self.token()
            size = 1
            seq.append(TERM)
        elif c in _WORD:
            seq.append(self.named(self.name(), owner))
            size = 1
        elif c == ".":
            self.i += 1
            seq.append(TERM)
            size = 1
        elif c in "*+?{":
            if not seq:
                self.fail(f"'{c}' has nothing before it to repeat")
            self.i += 1
            self.space(nested)
            lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}.get(c) or self.bounds(nested)
            if hi is not None and lo > hi:
                self.fail(f"repetition {{{lo},{hi}}} has its minimum above its maximum", start)
            count = max(lo, hi or 0)
            if count > self.max_repeat:
                self.fail(f"repetition count {count} is above the limit of {self.max_repeat}", start)
            seq[-1], size = self.repeat(owner, seq[-1], size, lo, hi)
            return size
        else:
            return None
        self.space(nested)
        self.grow(size)
        return size

    def bounds(self, nested: bool) -> tuple[int, int | None]:
        lo = self.integer()
        self.space(nested)
        hi: int | None = lo
        if self.peek() == ",":
            self.i += 1
            self.space(nested)
            hi = None
            if self.peek() in _DIGITS:
                hi = self.integer()
                self.space(nested)
        elif self.peek() != "}":
            self.fail("expecting ',' or '}'")
        if self.peek() != "}":
            self.fail("expecting '}'")
        self.i += 1
        self.space(nested)
        return lo, hi

    def repeat(self, owner: str, sym: int, size: int, lo: int, hi: int | None) -> tuple[int, int]:
        """S{lo,hi} as llama.cpp rewrites it, reduced to what the checks need:
        S* is S' ::= S S' | (left recursive when S can be empty, as in llama.cpp)."""
        if hi == 0:  # S{0}: llama.cpp drops S
            return EPS, 0
        n_opt = 1 if hi is None else hi - lo
        main = size * lo + (1 if n_opt else 0)
        self.grow(main - size + n_opt * (size + 3))
        if hi is None:
            loop = self.new_rule(owner)
            self.alts[loop] = [[sym, loop], []]
            self.loops.add(loop)
            return (loop if lo == 0 else self.new_rule(owner, [[sym, loop]])), main
        return self.new_rule(owner, [[sym]] + ([[]] if lo == 0 else [])), main

    def char_class(self) -> int:
        start = self.i
        self.i += 1
        negated = self.peek() == "^"
        if negated:
            self.i += 1
        ranges = []
        while self.peek() != "]":
            if not self.peek():
                self.fail("unterminated character class", start)
            lo = hi = self.char()
            if self.peek() == "-" and self.peek(1) != "]":
                if not self.peek(1):
                    self.fail("unterminated character class", start)
                self.i += 1
                hi = self.char()
                if hi < lo:
                    self.fail(f"character range {_show(lo)}-{_show(hi)} is inverted", start)
            ranges.append((lo, hi))
        self.i += 1
        if not ranges:
            self.fail("empty character class", start)
        if not _class_matches_something(ranges, negated):
            text = self.s[start:self.i]
            text = text if len(text) <= 40 else text[:37] + "..."
            self.fail(f"character class {text} matches no character", start)
        return 2 * len(ranges)

    def token(self) -> None:
        """<[id]>, <text>, and their negations !<...>; llama.cpp resolves the text with the vocab."""
        start, negated = self.i, self.peek() == "!"
        if negated:
            self.i += 1
        if self.peek() != "<":
            self.fail("expecting '<' after '!'")
        self.i += 1
        if self.peek() == "[":
            self.i += 1
            token_id = self.integer()
            if token_id > 0xFFFFFFFF:
                self.fail("token id is too big")
            for want in "]>":
                if self.peek() != want:
                    self.fail(f"expecting '{want}'")
                self.i += 1
            self.tokens.append(TokenRef(negated, token_id, None, self._where(start)))
            return
        end = self.s.find(">", self.i)
        if end < 0:
            self.fail("expecting '>' to close the token")
        self.tokens.append(TokenRef(negated, None, self.s[start + negated:end + 1], self._where(start)))
        self.i = end + 1

    def _where(self, at: int) -> str:
        return f"line {self.s.count(chr(10), 0, at) + 1}, column {at - self.s.rfind(chr(10), 0, at)}"


def _show(cp: int) -> str:
    if 0x20 < cp < 0x7F:
        return chr(cp)
    return f"\\x{cp:02X}" if cp <= 0xFF else f"\\u{cp:04X}" if cp <= 0xFFFF else f"\\U{cp:08X}"


def _class_matches_something(ranges: list[tuple[int, int]], negated: bool) -> bool:
    # NUL counts as nothing: llama.cpp decodes token text as C strings, NUL never arrives.
    if not negated:
        return any(hi >= 1 for _, hi in ranges)
    nxt = 1  # lowest code point not yet excluded
    for lo, hi in sorted(ranges):
        if lo > nxt:
            return True
        nxt = max(nxt, hi + 1)
    return nxt <= MAX_CODE_POINT
