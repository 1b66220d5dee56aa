"""The lexical level of GBNF, as llama-grammar.cpp reads it (parse_space, parse_name,
parse_int, parse_char): comments and blanks, rule names, integers, escaped characters.
GbnfParser builds rules on top of it."""

from __future__ import annotations


class GrammarError(ValueError):
    """A grammar llama.cpp must not be given; the message says why, in one line."""


MAX_CODE_POINT = 0x10FFFF
WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")
DIGITS = frozenset("0123456789")
_HEX = frozenset("0123456789abcdefABCDEF")
_HEX_SIZE = {"x": 2, "u": 4, "U": 8}
_SIMPLE_ESCAPES = {"t": "\t", "r": "\r", "n": "\n", "\\": "\\", '"': '"', "[": "[", "]": "]", "-": "-"}


class GbnfScanner:
    """A cursor over grammar text; fail() raises GrammarError naming line and column."""

    def __init__(self, text: str):
        self.s, self.i = text, 0

    def fail(self, what: str, at: int | None = None):
        raise GrammarError(f"{what} at {self._where(self.i if at is None else at)}")

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.s[j] if j < len(self.s) else ""

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
        return self._run_of(WORD_CHARS, "a rule name")

    def integer(self) -> int:
        digits = self._run_of(DIGITS, "an integer")
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
                self.fail(f"code point {show_code_point(cp)} is beyond Unicode (max \\U0010FFFF)", start)
            return cp
        if e and e in _SIMPLE_ESCAPES:
            self.i += 2
            return ord(_SIMPLE_ESCAPES[e])
        self.fail(f"unknown escape '\\{e}'")

    def _where(self, at: int) -> str:
        return f"line {self.s.count(chr(10), 0, at) + 1}, column {at - self.s.rfind(chr(10), 0, at)}"


def show_code_point(cp: int) -> str:
    if 0x20 < cp < 0x7F:
        return chr(cp)
    return f"\\x{cp:02X}" if cp <= 0xFF else f"\\u{cp:04X}" if cp <= 0xFFFF else f"\\U{cp:08X}"


def class_matches_something(ranges: list[tuple[int, int]], negated: bool) -> bool:
    # NUL counts as nothing: llama.cpp decodes token text as C strings, NUL never arrives.
    if not negated:
        return any(hi >= 1 for _, hi in ranges)
    nxt = 1  # lowest code point not yet excluded
    for lo, hi in sorted(ranges):
        if lo > nxt:
            return True
        nxt = max(nxt, hi + 1)
    return nxt <= MAX_CODE_POINT
