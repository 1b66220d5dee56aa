"""A small GBNF matcher for tests: does a grammar accept a whole string?

Reads the GBNF our converters write (llama.cpp's syntax: literals, [classes], rule names,
groups, alternatives, * + ? {m,n}; comments; a rule may span lines inside parentheses) and
matches by sets of end positions, so ambiguity costs sets, not backtracking. Slow on long
text; it is for short strings in tests. Not for left-recursive grammars (the checker
refuses those anyway).
"""

from __future__ import annotations

import re
import sys

_ESC = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "[": "[", "]": "]", "-": "-"}
_HEX = {"x": 2, "u": 4, "U": 8}
_NAME = re.compile(r"[a-zA-Z0-9-]+")


class Grammar:
    def __init__(self, text: str):
        self.s, self.i = text, 0
        self.rules: dict[str, tuple] = {}
        while True:
            self._blank(newlines=True)
            if self.i >= len(self.s):
                break
            name = self._name()
            self._blank()
            assert self.s.startswith("::=", self.i), f"expected ::= at {self.i}"
            self.i += 3
            self.rules[name] = self._alts(depth=0)

    # -- parsing -------------------------------------------------------------------------------

    def _blank(self, newlines: bool = False) -> None:
        while self.i < len(self.s):
            c = self.s[self.i]
            if c == "#":
                while self.i < len(self.s) and self.s[self.i] != "\n":
                    self.i += 1
            elif c in " \t" or (newlines and c in "\r\n"):
                self.i += 1
            else:
                break

    def _name(self) -> str:
        m = _NAME.match(self.s, self.i)
        assert m, f"expected a name at {self.i}: {self.s[self.i:self.i + 20]!r}"
        self.i = m.end()
        return m.group()

    def _char(self) -> str:
        c = self.s[self.i]
        if c != "\\":
            self.i += 1
            return c
        e = self.s[self.i + 1]
        if e in _HEX:
            n = _HEX[e]
            self.i += 2 + n
            return chr(int(self.s[self.i - n:self.i], 16))
        self.i += 2
        return _ESC[e]

    def _alts(self, depth: int) -> tuple:
        alts = [self._seq(depth)]
        while self.i < len(self.s) and self.s[self.i] == "|":
            self.i += 1
            alts.append(self._seq(depth))
        return ("alt", tuple(alts))

    def _seq(self, depth: int) -> tuple:
        items = []
        while True:
            self._blank(newlines=depth > 0)
            if self.i >= len(self.s):
                break
            c = self.s[self.i]
            if c == '"':
                self.i += 1
                text = []
                while self.s[self.i] != '"':
                    text.append(self._char())
                self.i += 1
                item = ("lit", "".join(text))
            elif c == "[":
                self.i += 1
                neg = self.s[self.i] == "^"
                self.i += neg
                ranges = []
                while self.s[self.i] != "]":
                    a = self._char()
                    b = a
                    if self.s[self.i] == "-" and self.s[self.i + 1] != "]":
                        self.i += 1
                        b = self._char()
                    ranges.append((ord(a), ord(b)))
                self.i += 1
                item = ("cls", neg, tuple(ranges))
            elif c == "(":
                self.i += 1
                item = self._alts(depth + 1)
                self._blank(newlines=True)
                assert self.s[self.i] == ")", f"expected ) at {self.i}"
                self.i += 1
            elif _NAME.match(self.s, self.i):
                item = ("ref", self._name())
            else:
                break
            items.append(self._postfix(item))
        return ("seq", tuple(items))

    def _postfix(self, item: tuple) -> tuple:
        while self.i < len(self.s) and self.s[self.i] in "*+?{":
            c = self.s[self.i]
            self.i += 1
            if c == "{":
                end = self.s.index("}", self.i)
                nums = self.s[self.i:end].split(",")
                self.i = end + 1
                lo = int(nums[0].strip() or 0)
                hi = lo if len(nums) == 1 else (int(nums[1]) if nums[1].strip() else None)
            else:
                lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
            item = ("rep", item, lo, hi)
        return item

    # -- matching ------------------------------------------------------------------------------

    def accepts(self, text: str, root: str = "root") -> bool:
        old = sys.getrecursionlimit()
        sys.setrecursionlimit(max(old, 20000))
        try:
            memo: dict[tuple[int, int], frozenset] = {}

            def ends(node: tuple, i: int) -> frozenset:
                key = (id(node), i)  # nodes live as long as the grammar: their ids stay theirs
                if key not in memo:
                    memo[key] = frozenset(self._ends(node, text, i, ends))
                return memo[key]

            return len(text) in ends(self.rules[root], 0)
        finally:
            sys.setrecursionlimit(old)

    def _ends(self, node: tuple, text: str, i: int, ends) -> set[int]:
        kind = node[0]
        if kind == "lit":
            return {i + len(node[1])} if text.startswith(node[1], i) else set()
        if kind == "cls":
            if i >= len(text):
                return set()
            cp = ord(text[i])
            inside = any(a <= cp <= b for a, b in node[2])
            return {i + 1} if inside != node[1] else set()
        if kind == "ref":
            return set(ends(self.rules[node[1]], i))
        if kind == "alt":
            return set().union(*(ends(alt, i) for alt in node[1]))
        if kind == "seq":
            cur = {i}
            for item in node[1]:
                cur = set().union(*(ends(item, j) for j in cur)) if cur else set()
            return cur
        _, item, lo, hi = node
        out, cur, seen, k = set(), {i}, set(), 0
        while cur and (hi is None or k <= hi):
            if k >= lo:
                out |= cur
            if hi is not None and k == hi:
                break
            nxt = set().union(*(ends(item, j) for j in cur))
            if hi is None and k >= lo:
                nxt -= seen
                seen |= nxt
            cur, k = nxt, k + 1
        return out

    # -- sampling ------------------------------------------------------------------------------

    _POOL = [chr(c) for c in range(0x20, 0x7F)] + list("éßж中😀\t\n\x00\x1f\x7f\\\"")

    def sample(self, rng, root: str = "root", max_depth: int = 30) -> str:
        """A random string the grammar accepts (past max_depth, the shortest way out)."""
        if not hasattr(self, "_height"):
            self._height = self._heights()
        out: list[str] = []
        self._gen(self.rules[root], rng, out, 0, max_depth)
        return "".join(out)

    def _heights(self) -> dict[str, float]:
        """How many rule expansions each rule needs at least to finish (fixpoint)."""
        h = {name: float("inf") for name in self.rules}
        changed = True
        while changed:
            changed = False
            for name, node in self.rules.items():
                v = self._node_height(node, h) + 1
                if v < h[name]:
                    h[name], changed = v, True
        return h

    def _node_height(self, node: tuple, h: dict) -> float:
        kind = node[0]
        if kind in ("lit", "cls"):
            return 0
        if kind == "ref":
            return h[node[1]]
        if kind == "alt":
            return min(self._node_height(a, h) for a in node[1])
        if kind == "seq":
            return max((self._node_height(i, h) for i in node[1]), default=0)
        return self._node_height(node[1], h) if node[2] else 0

    def _gen(self, node: tuple, rng, out: list[str], depth: int, max_depth: int) -> None:
        kind = node[0]
        deep = depth > max_depth
        if kind == "lit":
            out.append(node[1])
        elif kind == "cls":
            _, neg, ranges = node
            if neg:
                out.append(rng.choice([c for c in self._POOL if not any(a <= ord(c) <= b for a, b in ranges)]))
            else:
                a, b = rng.choice(ranges)
                out.append(chr(rng.randint(a, min(b, a + 200))))
        elif kind == "ref":
            self._gen(self.rules[node[1]], rng, out, depth + 1, max_depth)
        elif kind == "alt":
            alts = node[1]
            if deep:
                best = min(self._node_height(a, self._height) for a in alts)
                alts = [a for a in alts if self._node_height(a, self._height) == best]
            self._gen(rng.choice(alts), rng, out, depth, max_depth)
        elif kind == "seq":
            for item in node[1]:
                self._gen(item, rng, out, depth, max_depth)
        else:
            _, item, lo, hi = node
            n = lo if deep else rng.randint(lo, min(hi if hi is not None else lo + 3, lo + 3))
            for _ in range(n):
                self._gen(item, rng, out, depth + 1, max_depth)
