"""Sizes, durations and rates for people: the one place they are formatted.

Binary units throughout (KiB, MiB, GiB), as llama.cpp and the memory plan count them.
"""

from __future__ import annotations

from collections import deque

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB
_SIZE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def human_bytes(n: float) -> str:
    """1536 -> '1.5 KiB'; whole bytes below 1 KiB."""
    for unit in _SIZE_UNITS:
        if abs(n) < 1024 or unit == _SIZE_UNITS[-1]:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def human_rate(bytes_per_s: float) -> str:
    """Transfer speed: '12.3 MiB/s'."""
    return f"{human_bytes(bytes_per_s)}/s"


def human_duration(seconds: float | None) -> str:
    """An ETA or elapsed time: '42s', '3m07s', '1h05m'; '?' when unknown."""
    if seconds is None:
        return "?"
    seconds = int(max(0, seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


def human_count(n: int) -> str:
    """Parameter counts: 134515008 -> '134.5M' (decimal, as model cards write them)."""
    for div, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= div:
            return f"{n / div:.1f}{suffix}"
    return str(n)


def eta(remaining: float, per_second: float) -> float | None:
    """Seconds until `remaining` is done at `per_second`; None while the rate is unknown."""
    return remaining / per_second if per_second > 0 else None


class RateMeter:
    """Speed over the last `window` seconds, fed (time, amount done so far) samples, so a
    stall or a burst shows within seconds; an infinite window averages the whole run."""

    def __init__(self, window: float = 5.0):
        self.window = window
        self.samples: deque[tuple[float, float]] = deque()

    def add(self, now: float, done: float) -> None:
        self.samples.append((now, done))
        while len(self.samples) > 2 and now - self.samples[0][0] > self.window:
            self.samples.popleft()

    def clear(self) -> None:
        """Forget the samples: the next amounts count from a new start (another file)."""
        self.samples.clear()

    def rate(self) -> float:
        """Amount per second over the window; 0.0 until two samples span some time."""
        if not self.samples:
            return 0.0
        (t0, done0), (t1, done1) = self.samples[0], self.samples[-1]
        return (done1 - done0) / (t1 - t0) if t1 > t0 else 0.0

    def eta(self, total: float) -> float | None:
        """Seconds until `total` at the current rate; None while the rate is unknown."""
        done = self.samples[-1][1] if self.samples else 0.0
        return eta(total - done, self.rate())


def parse_size(text: str, flag: str = "size") -> int:
    """'6GiB', '512MiB', '1.5G', '4096' (MiB) -> bytes; ValueError naming `flag` otherwise."""
    import re

    m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*(b|kib|kb|k|mib|mb|m|gib|gb|g|tib|tb|t)?\s*$", text or "", re.IGNORECASE)
    if not m or float(m.group(1)) <= 0:
        raise ValueError(f"{flag} {text!r}: give a size like 512MiB or 6GiB (a bare number is MiB)")
    unit = (m.group(2) or "m").lower()[0]
    return int(float(m.group(1)) * {"b": 1, "k": KiB, "m": MiB, "g": GiB, "t": 1024 * GiB}[unit])
