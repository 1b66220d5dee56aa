"""Whether a GBNF grammar is safe to hand to llama.cpp: one call, one-line reasons.

llama.cpp trusts its grammar: `"a"{5,2}` makes it generate rules without end, a class
matching nothing aborts the process while sampling, left recursion through an
empty-matching prefix overflows its stack, a rule that can never finish leaves sampling
with no allowed token. grammar_parse handles the syntax; this adds the checks that need
the whole grammar: root, undefined and unused rules, left recursion, productivity.
Pure Python, no llama_cpp import.
"""

from __future__ import annotations

from collections import defaultdict

from edge_infer.chat.gbnf.parse import EPS, TERM, GbnfParser, TokenRef
from edge_infer.chat.gbnf.scan import GrammarError

__all__ = ["CheckedGrammar", "GrammarError", "TokenRef", "checked_gbnf", "validate_gbnf"]


class CheckedGrammar(str):
    """GBNF text that validate_gbnf accepted, carrying its token references: validated once,
    where it was made or received; the engine checks only the references against its
    vocabulary. Anything else (a plain str) is validated by the engine itself."""
    refs: tuple[TokenRef, ...] = ()


def checked_gbnf(text: str, **limits) -> CheckedGrammar:
    """validate_gbnf(text, **limits), the text returned as a CheckedGrammar."""
    if isinstance(text, CheckedGrammar) and not limits:
        return text
    refs = validate_gbnf(text, **limits)
    grammar = CheckedGrammar(text)
    grammar.refs = refs
    return grammar


def validate_gbnf(text: str, root: str = "root", max_chars: int = 64 * 1024, max_repeat: int = 1000,
                  max_rules: int = 1000, max_elements: int = 100_000,
                  allow_unused: bool = False) -> tuple[TokenRef, ...]:
    """Raise GrammarError unless llama.cpp can safely run `text` from rule `root`.
    Returns the grammar's token references (<[id]>, <text>): only a vocabulary can tell
    whether those can be generated, so the engine checks them against its model.

    max_elements bounds the grammar after llama.cpp expands repetitions (S{m,n} copies S
    m times and adds n-m rules), since that expansion, not the text, is what eats memory.
    allow_unused is for our own converters (json_schema_to_gbnf always adds `space`);
    unused rules are still parsed and checked for left recursion, as llama.cpp does.
    """
    if not isinstance(text, str):
        raise GrammarError("grammar must be a string")
    if len(text) > max_chars:
        raise GrammarError(f"grammar is {len(text)} characters long; the limit is {max_chars}")
    if "\x00" in text:  # llama.cpp reads a C string: it would silently stop there
        raise GrammarError("grammar contains a NUL character")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise GrammarError("grammar is not valid Unicode text (lone surrogate)") from None
    g = GbnfParser(text, max_repeat, max_rules, max_elements)
    g.parse()
    if not g.defined:
        raise GrammarError("grammar is empty: it defines no rules")
    used = _check_references(g, root, allow_unused)
    nullable = _closure(g.alts, {TERM: False, EPS: True})
    _check_left_recursion(g, nullable)
    _check_empty_repeats(g, nullable)
    productive = _closure(g.alts, {TERM: True, EPS: True})
    stuck = [name for name, rid in g.ids.items() if rid in used and not productive[rid]]
    if stuck:  # sampling would reach a point where no token is allowed
        names = ", ".join(f"'{n}'" for n in stuck[:5]) + (", ..." if len(stuck) > 5 else "")
        raise GrammarError(f"{'rule' if len(stuck) == 1 else 'rules'} {names} can never produce "
                           "a finite string (every alternative needs more of itself)")
    return tuple(g.tokens)


def _check_references(g: GbnfParser, root: str, allow_unused: bool) -> set[int]:
    """The rules reachable from root, once root exists and every reference is defined."""
    if root not in g.ids or g.ids[root] not in g.defined:
        raise GrammarError(f"grammar has no '{root}' rule")
    for name, rid in g.ids.items():
        if rid not in g.defined:
            raise GrammarError(f"rule '{g.first_user[rid]}' uses undefined rule '{name}'")
    seen, todo = {g.ids[root]}, [g.ids[root]]
    while todo:
        for seq in g.alts[todo.pop()]:
            for sym in seq:
                if sym >= 0 and sym not in seen:
                    seen.add(sym)
                    todo.append(sym)
    for name, rid in g.ids.items():
        if rid not in seen and not allow_unused:
            raise GrammarError(f"rule '{name}' is never used (not reachable from '{root}')")
    return seen


def _closure(alts: list[list[list[int]]], terminal_ok: dict[int, bool]) -> list[bool]:
    """Rules with an alternative whose symbols all hold, by worklist (linear in grammar size).
    terminal_ok says which terminals hold: all of them for 'productive', only "" for 'nullable'."""
    holds = [False] * len(alts)
    need: list[int] = []     # per live alternative: rule symbols not yet known to hold
    alt_rule: list[int] = []
    users = defaultdict(list)  # rule id -> alternatives waiting on it (once per occurrence)
    ready = []
    for rid, seqs in enumerate(alts):
        for seq in seqs:
            if any(sym < 0 and not terminal_ok[sym] for sym in seq):
                continue
            refs = [sym for sym in seq if sym >= 0]
            slot = len(need)
            need.append(len(refs))
            alt_rule.append(rid)
            for sym in refs:
                users[sym].append(slot)
            if not refs:
                ready.append(rid)
    while ready:
        rid = ready.pop()
        if holds[rid]:
            continue
        holds[rid] = True
        for slot in users[rid]:
            need[slot] -= 1
            if need[slot] == 0:
                ready.append(alt_rule[slot])
    return holds


def _check_empty_repeats(g: GbnfParser, nullable: list[bool]) -> None:
    """A repetition whose item can match nothing ("a"? repeated, or a rule with an empty
    alternative): llama.cpp keeps one parse stack per way to split the text among the
    copies, so ("a"?){0,1000} ran past 60 s on the first token, holding every request."""
    for sym, where in g.repeats:
        if sym == EPS or (sym >= 0 and nullable[sym]):
            raise GrammarError(f"the repeated item can match the empty string, which makes llama.cpp's "
                               f"grammar search explode; make it match at least one character (write "
                               f"x{{0,n}} instead of (x?){{n}}) at {where}")


def _check_left_recursion(g: GbnfParser, nullable: list[bool]) -> None:
    """llama_grammar_detect_left_recursion's question, with a full nullable analysis: can a
    rule reach itself through leftmost symbols that may all match nothing?"""
    left = [[] for _ in g.alts]
    for rid, seqs in enumerate(g.alts):
        for seq in seqs:
            for sym in seq:
                if sym >= 0:
                    left[rid].append(sym)
                if not (sym == EPS or (sym >= 0 and nullable[sym])):
                    break
    state = [0] * len(g.alts)  # 0 new, 1 on the current path, 2 done
    for start in range(len(g.alts)):
        if state[start]:
            continue
        path, stack = [start], [iter(left[start])]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state[nxt] == 1:
                cycle = path[path.index(nxt):]
                if len(cycle) == 1 and nxt in g.loops:
                    raise GrammarError(f"rule '{g.owner[nxt]}' repeats (* + {{m,}}) something that can "
                                       "match the empty string (left recursion)")
                names = [g.owner[r] for r in cycle] + [g.owner[nxt]]
                names = [n for i, n in enumerate(names) if i == 0 or n != names[i - 1]]
                names += names[-1:] if len(names) == 1 else []
                raise GrammarError(f"left recursion: rule '{names[0]}' can reach itself without "
                                   f"consuming input ({' -> '.join(names)})")
            elif state[nxt] == 0:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(left[nxt]))
