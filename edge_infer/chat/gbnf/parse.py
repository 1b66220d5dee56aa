"""GBNF text -> the flat rules llama.cpp would build from it, or GrammarError.

Follows llama-grammar.cpp's syntax (parse_rule / parse_alternates / parse_sequence /
parse_char / parse_space / parse_token) and refuses, with where and why, what that parser
takes but then chokes on: inverted repetition bounds (unsigned, so it makes rules without
end), character classes matching nothing, code points beyond Unicode. Pure Python, no
llama_cpp import, so it can be tested alone. grammar_scan reads the characters, names and
numbers; grammar_check runs the whole-grammar checks.
"""

from __future__ import annotations

from dataclasses import dataclass

from edge_infer.chat.gbnf.scan import DIGITS, WORD_CHARS, GbnfScanner, class_matches_something, show_code_point

# Nesting llama.cpp can parse without overflowing a thread's stack (30,000 levels crashed the
# server); converters write up to 1000 (json_schema_to_gbnf for maxLength 1000).
MAX_DEPTH = 1024
TERM, EPS = -1, -2  # symbols: a terminal that consumes input, an empty literal ""


@dataclass(frozen=True)
class TokenRef:
    """A <[id]> or <text> token in a grammar (text keeps its brackets, as llama.cpp reads it)."""
    negated: bool
    token_id: int | None
    text: str | None
    where: str


class GbnfParser(GbnfScanner):
    """Text -> flat rules: alts[id] is a list of sequences of symbols (rule ids, TERM, EPS).

    Groups and repetitions become anonymous rules as in llama.cpp, so grammar_check
    sees the grammar llama.cpp will run; owner[id] names the rule each one came from.
    """

    def __init__(self, text: str, max_repeat: int, max_rules: int, max_elements: int):
        super().__init__(text)
        self.max_repeat, self.max_rules, self.max_elements = max_repeat, max_rules, max_elements
        self.ids: dict[str, int] = {}   # named rules, defined or only referenced
        self.alts: list[list[list[int]]] = []
        self.owner: list[str] = []
        self.defined: set[int] = set()
        self.first_user: dict[int, str] = {}  # undefined-rule messages name who used it
        self.loops: set[int] = set()  # the S' ::= S S' | rules of unbounded repetitions
        self.elements = 0
        self.tokens: list[TokenRef] = []  # <...> references, checked against a vocabulary later
        # (symbol, where) of repetitions that can match more than once: grammar_check refuses
        # those whose item can match nothing (llama.cpp's stacks explode on ("a"?){0,1000}).
        self.repeats: list[tuple[int, str]] = []
        self._repeated_at: tuple[int, int] | None = None  # (seq id, length) right after a repetition

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
        elif c in WORD_CHARS:
            seq.append(self.named(self.name(), owner))
            size = 1
        elif c == ".":
            self.i += 1
            seq.append(TERM)
            size = 1
        elif c in "*+?{":
            if not seq:
                self.fail(f"'{c}' has nothing before it to repeat")
            if self._repeated_at == (id(seq), len(seq)):  # "a"{60}{60} segfaults llama.cpp
                self.fail(f"'{c}' repeats a repetition; put the repeated part in parentheses, "
                          f"as in (x{{m}}){{n}}")
            self.i += 1
            self.space(nested)
            lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}.get(c) or self.bounds(nested)
            if hi is not None and lo > hi:
                self.fail(f"repetition {{{lo},{hi}}} has its minimum above its maximum", start)
            count = max(lo, hi or 0)
            if count > self.max_repeat:
                self.fail(f"repetition count {count} is above the limit of {self.max_repeat}", start)
            if hi is None or hi > 1:
                self.repeats.append((seq[-1], self._where(start)))
            seq[-1], size = self.repeat(owner, seq[-1], size, lo, hi)
            self._repeated_at = (id(seq), len(seq))
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
            if self.peek() in DIGITS:
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
                    self.fail(f"character range {show_code_point(lo)}-{show_code_point(hi)} is inverted", start)
            ranges.append((lo, hi))
        self.i += 1
        if not ranges:
            self.fail("empty character class", start)
        if not class_matches_something(ranges, negated):
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
