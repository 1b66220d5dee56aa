"""keep_alive as Ollama reads it: how long a model stays loaded after its last request.

A number is seconds; a string is a Go duration ("5m", "1h30m", "90s", "250ms") or a bare
number of seconds ("300"). Negative keeps the model until memory is needed; 0 unloads
it as soon as its last request ends.
"""

from __future__ import annotations

import math
import re

from edge_infer.errors import EdgeInferError

FOREVER = math.inf  # loaded until another model needs the room (or the host closes)

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")


class KeepAliveError(EdgeInferError, ValueError):
    """A keep_alive that does not parse (the server answers 400 naming the field)."""


def parse_keep_alive(value) -> float:
    """Seconds to stay loaded after the last request (FOREVER for negative values)."""
    if isinstance(value, bool) or value is None:
        raise KeepAliveError(f"keep_alive must be a duration such as '5m' or a number of seconds, not {value!r}")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        seconds = _parse_text(value.strip())
    else:
        raise KeepAliveError(f"keep_alive must be a duration such as '5m' or a number of seconds, "
                             f"not {type(value).__name__}")
    if math.isnan(seconds):
        raise KeepAliveError("keep_alive must be a number of seconds, not NaN")
    return FOREVER if seconds < 0 else seconds


def _parse_text(text: str) -> float:
    shown = text if len(text) <= 40 else text[:40] + "…"
    sign = -1.0 if text.startswith("-") else 1.0
    body = text.lstrip("+-")
    try:
        return sign * float(body)  # "300", "-1": seconds
    except ValueError:
        pass
    pos, total = 0, 0.0
    for m in _PART.finditer(body):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if not body or pos != len(body):
        raise KeepAliveError(f"keep_alive {shown!r} is not a duration: use e.g. '30s', '5m', '1h30m', "
                             f"0 (unload after the request) or -1 (keep loaded)")
    return sign * total


def describe(seconds: float) -> str:
    """For /api/ps and the TUI: 'forever', '5m00s'."""
    from edge_infer.units import human_duration

    return "until memory is needed" if seconds == FOREVER else human_duration(seconds)
