"""Digit rules for bounded integers and numbers.

Integers follow llama.cpp's build_min_max_int (common/json-schema-to-grammar.cpp) so the
rules read the same, with one fix: a minimum whose later digits start with a zero (100,
105, 2030) kept only the value of those digits there, so `minimum: 100` let "10" through;
here the rest of the digits keeps its width; and a negative maximum let a leading zero
in ("-05"). Numbers with bounds are ours (llama.cpp's
converter drops them): an integral part in range with any fraction, the edges exact, no
exponent (an exponent could carry a value past a bound).
"""

from __future__ import annotations

import math

from edge_infer.chat.gbnf.json_rules import SchemaError

MAX_DIGITS = 16  # as the unbounded rules: a small model can write digits for ever
BOUND_DIGITS = 15  # a bound with more digits on its inner side cannot be written in 16


def integer_range(lo: int | None, hi: int | None) -> str:
    """GBNF (without the enclosing parentheses) for the integers lo..hi; None: no bound."""
    if lo is None and hi is None:
        raise ValueError("an integer range needs a minimum or a maximum")
    out: list[str] = []
    _range(lo, hi, out, MAX_DIGITS, top=True)
    return "".join(out)


def _digits(out: list[str], lo: str, hi: str) -> None:
    out.append(f"[{lo}]" if lo == hi else f"[{lo}-{hi}]")


def _more(out: list[str], lo: int, hi: int) -> None:
    """lo..hi more digits."""
    out.append("[0-9]")
    if lo == hi == 1:
        return
    out.append(f"{{{lo}" + ("" if hi == lo else f",{hi}") + "}")


def _prev(c: str) -> str:
    return chr(ord(c) - 1)


def _next(c: str) -> str:
    return chr(ord(c) + 1)


def _uniform(out: list[str], frm: str, to: str) -> None:
    """Digit strings of one width from `frm` to `to` (llama.cpp's uniform_range)."""
    i = 0
    while i < len(frm) and i < len(to) and frm[i] == to[i]:
        i += 1
    if i:
        out.append(f'"{frm[:i]}"')
    if i >= len(frm) or i >= len(to):
        return
    if i:
        out.append(" ")
    rest = len(frm) - i - 1
    if rest == 0:
        out.append(f"[{frm[i]}-{to[i]}]")
        return
    frm_rest, to_rest = frm[i + 1:], to[i + 1:]
    zeros, nines = "0" * rest, "9" * rest
    to_reached = False
    out.append("(")
    if frm_rest == zeros:
        _digits(out, frm[i], _prev(to[i]))
        out.append(" ")
        _more(out, rest, rest)
    else:
        out.append(f"[{frm[i]}] (")
        _uniform(out, frm_rest, nines)
        out.append(")")
        if frm[i] < _prev(to[i]):
            out.append(" | ")
            if to_rest == nines:
                _digits(out, _next(frm[i]), to[i])
                to_reached = True
            else:
                _digits(out, _next(frm[i]), _prev(to[i]))
            out.append(" ")
            _more(out, rest, rest)
    if not to_reached:
        out.append(" | ")
        _digits(out, to[i], to[i])
        out.append(" ")
        _uniform(out, zeros, to_rest)
    out.append(")")


def _at_least(out: list[str], rest: str, decimals: int) -> None:
    """The digits after a first one, for a number >= a minimum: more digits than `rest`,
    or as many and not below it (llama.cpp's not-top-level minimum branch, on the digits
    themselves so a leading zero keeps its place)."""
    less = max(decimals - 1, 1)
    if rest.strip("0") == "":
        _more(out, len(rest), decimals)
        return
    c = rest[0]
    if len(rest) == 1:
        if c > "0":
            _digits(out, "0", _prev(c))
            out.append(" ")
            _more(out, 1, less)
            out.append(" | ")
        _digits(out, c, "9")
        out.append(" ")
        _more(out, 0, less)
        return
    if c > "0":
        _digits(out, "0", _prev(c))
        out.append(" ")
        _more(out, len(rest), less)
        out.append(" | ")
    _digits(out, c, c)
    out.append(" (")
    _at_least(out, rest[1:], less)
    out.append(")")
    if c < "9":
        out.append(" | ")
        _digits(out, _next(c), "9")
        out.append(" ")
        _more(out, len(rest) - 1, less)


def _range(lo: int | None, hi: int | None, out: list[str], decimals: int, top: bool) -> None:
    if lo is not None and hi is not None:
        if lo < 0 and hi < 0:
            out.append('"-" (')
            _range(-hi, -lo, out, decimals, True)
            out.append(")")
            return
        if lo < 0:
            out.append('"-" (')
            _range(0, -lo, out, decimals, True)
            out.append(") | ")
            lo = 0
        lo_s, hi_s = str(lo), str(hi)
        for width in range(len(lo_s), len(hi_s)):
            _uniform(out, lo_s, "9" * width)
            lo_s = "1" + "0" * width
            out.append(" | ")
        _uniform(out, lo_s, hi_s)
        return
    less = max(decimals - 1, 1)
    if lo is not None:
        if not top:
            _at_least(out, str(lo), decimals)
        elif lo < 0:
            out.append('"-" (')
            _range(None, -lo, out, decimals, False)
            out.append(") | [0] | [1-9] ")
            _more(out, 0, decimals - 1)
        elif lo == 0:
            out.append("[0] | [1-9] ")
            _more(out, 0, less)
        elif lo <= 9:
            c = str(lo)
            if c > "1":
                _digits(out, "1", _prev(c))
                out.append(" ")
                _more(out, 1, less)
                out.append(" | ")
            _digits(out, c, "9")
            out.append(" ")
            _more(out, 0, less)
        else:
            s = str(lo)
            if s[0] > "1":
                _digits(out, "1", _prev(s[0]))
                out.append(" ")
                _more(out, len(s), less)
                out.append(" | ")
            _digits(out, s[0], s[0])
            out.append(" (")
            _at_least(out, s[1:], less)
            out.append(")")
            if s[0] < "9":
                out.append(" | ")
                _digits(out, _next(s[0]), "9")
                out.append(" ")
                _more(out, len(s) - 1, less)
        return
    assert hi is not None
    if hi >= 0:
        if top:
            out.append('"-" [1-9] ')
            _more(out, 0, less)
            out.append(" | ")
        _range(0, hi, out, decimals, True)
    else:  # ours: llama.cpp continued "-" as after a first digit, so -05 came out (not JSON)
        out.append('"-" (')
        _range(-hi, None, out, decimals, True)
        out.append(")")


FRACTION = f'("." [0-9]{{1,{MAX_DIGITS}}})?'


def number_range(lo: float | None, lo_open: bool, hi: float | None, hi_open: bool) -> str | None:
    """GBNF for JSON numbers within the bounds (open: exclusive), or None when no number
    written without an exponent can be inside them."""
    parts = []
    if hi is None or hi > 0 or (hi == 0 and not hi_open):
        pos = _magnitudes(max(lo, 0) if lo is not None else 0, lo_open and lo is not None and lo >= 0,
                          hi, hi_open)
        parts += [pos] if pos else []
    if lo is None or lo < 0:
        m_lo = 0 if hi is None or hi >= 0 else -hi
        neg = _magnitudes(m_lo, hi_open and hi is not None and hi <= 0, None if lo is None else -lo, lo_open)
        parts += [f'"-" ({neg})'] if neg else []
    return " | ".join(parts) if parts else None


def _magnitudes(lo: float, lo_open: bool, hi: float | None, hi_open: bool) -> str | None:
    """Unsigned numbers m with lo <= m <= hi (or < where open), lo >= 0: an integral part
    whose whole unit interval fits, with any fraction; the edges where they are exact."""
    first = math.floor(lo) + 1 if (lo_open or lo != math.floor(lo)) else int(lo)  # [first, first+1) all in
    last = None if hi is None else math.floor(hi) - 1                               # [last, last+1) all in
    alts = []
    if last is None or first <= last:
        alts.append(f"({integer_range(first, last)}) {FRACTION}")
    if hi is not None:
        top = math.floor(hi)  # the upper edge as an integer, where it is in range
        if not (hi_open and top == hi) and (top > lo or (top == lo and not lo_open)) and \
                (last is None or top > last) and top >= first:
            alts.append(f'"{top}"')
    if lo_open and lo == math.floor(lo) and (hi is None or hi >= lo + 1):
        alts.append(f'"{int(lo)}" "." [0-9]{{0,{MAX_DIGITS - 1}}} [1-9]')  # just above an open edge
    return " | ".join(alts) if alts else None


# -- a schema's bounds ----------------------------------------------------------------------

def _number(schema: dict, key: str, path: str):
    v = schema[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not math.isfinite(v)):
        raise SchemaError(f"{path}: {key} must be a number")
    return v


def read_bounds(schema: dict, path: str):
    """(lower, open, upper, open) from minimum / exclusiveMinimum / maximum / exclusiveMaximum,
    the stricter where both are given; draft 4's boolean exclusiveMinimum opens `minimum`."""
    out = []
    for inclusive, exclusive, stricter in (("minimum", "exclusiveMinimum", max), ("maximum", "exclusiveMaximum", min)):
        cands = []
        if inclusive in schema:
            cands.append((_number(schema, inclusive, path), schema.get(exclusive) is True))
        if exclusive in schema and not isinstance(schema[exclusive], bool):
            cands.append((_number(schema, exclusive, path), True))
        if not cands:
            out += [None, False]
            continue
        value = stricter(v for v, _ in cands)
        out += [value, any(o for v, o in cands if v == value)]
    return tuple(out)


def integer_body(schema: dict, path: str) -> str | None:
    """The digit rules for an integer schema's bounds (None: it has none). Fractional bounds
    round inwards, exclusive ones move one integer in (llama.cpp's get_bound)."""
    lo, lo_open, hi, hi_open = read_bounds(schema, path)
    if lo is not None:
        lo = math.floor(lo) + 1 if lo_open else math.ceil(lo)
    if hi is not None:
        hi = math.ceil(hi) - 1 if hi_open else math.floor(hi)
    lo, hi = _writable(lo, hi, path)
    if lo is not None and hi is not None and lo > hi:
        raise SchemaError(f"{path}: no integer is within its minimum and maximum")
    return None if lo is None and hi is None else integer_range(lo, hi)


def number_body(schema: dict, path: str) -> str | None:
    """Ours: llama.cpp leaves a number's bounds to the model."""
    lo, lo_open, hi, hi_open = read_bounds(schema, path)
    lo, hi = _writable(lo, hi, path)
    if lo is None and hi is None:
        return None
    body = number_range(lo, lo_open, hi, hi_open)
    if body is None:
        raise SchemaError(f"{path}: its minimum and maximum leave no number a grammar here can write "
                          "(a fraction between two close bounds)")
    return body


def _writable(lo, hi, path: str):
    """Bounds past what 16 digits reach on their outer side bound nothing (the digit
    rules stop there); on their inner side no 16-digit number reaches them."""
    limit = 10 ** BOUND_DIGITS
    if hi is not None and hi >= 10 * limit:
        hi = None
    if lo is not None and lo <= -10 * limit:
        lo = None
    if (lo is not None and lo >= limit) or (hi is not None and hi <= -limit):
        raise SchemaError(f"{path}: a bound beyond {BOUND_DIGITS} digits leaves no number a grammar "
                          "here can write")
    return lo, hi
