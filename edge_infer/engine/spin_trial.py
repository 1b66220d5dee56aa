"""A trial between ways of running ggml's CPU threads, decided by the engine's own step times.

The load a watch reads (engine/cpu_share.py) says *that* something else runs, not whether it
costs us: a client streaming our tokens on the same machine reads as most of a core of "other
load", yet two spinning threads still decode fastest beside it (AMD Zen 4, qwen-coder code edit:
21.3 tok/s on one sleeping thread, 27.2 on the two). Two busy loops do cost: two spinning
threads fell to 12-27 tok/s there, one sleeping thread kept 26-33. So each candidate decodes a
few steps in turn (A B C A B C ...), and the one with the least time per step wins.

Steps differ in size, and their time with it: while a trial runs the engine drafts nothing, a
prompt chunk (over MAX_TOKENS) decodes outside it on what the load suggests, and only steps of
the trial's most common token count are compared, the first step after each switch or chunk
left out (the threads it wakes). Pure: the governor feeds it (tokens, seconds) per step.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field

WINDOW = 4        # steps a candidate decodes per turn (the first after the switch not counted)
ROUNDS = 3        # turns per candidate: the machine's noise in one window is not a verdict
MORE_ROUNDS = 3   # turns added, once, when the steps were too mixed in size to compare
MAX_TOKENS = 64   # a larger step is a prompt chunk: not a trial step


@dataclass(frozen=True)
class Setting:
    poll: int      # ggml's threadpool poll (0: sleep at once at a barrier)
    threads: int   # decoding threads (0: the user's, left alone)

    def __str__(self) -> str:
        return f"poll {self.poll}" + (f", {self.threads} thread{'s' * (self.threads != 1)}" if self.threads else "")


@dataclass
class Trial:
    candidates: tuple[Setting, ...]
    window: int = WINDOW
    rounds: int = ROUNDS
    steps: list[tuple[Setting, int, float]] = field(default_factory=list)  # (setting, tokens, seconds)
    _turn: int = 0          # windows begun
    _in_window: int = 0     # steps recorded in the current window
    _extended: bool = False
    _skip: bool = False     # the next step follows a chunk decoded outside the trial: not counted

    @property
    def current(self) -> Setting:
        """The setting the next step decodes with."""
        return self.candidates[self._turn % len(self.candidates)]

    @property
    def done(self) -> bool:
        return self._turn >= self.rounds * len(self.candidates)

    def counts(self, tokens: int) -> bool:
        """Whether a step of this size is one of the trial's (else it decodes outside it)."""
        return tokens <= MAX_TOKENS

    def record(self, tokens: int, seconds: float) -> None:
        """One step decoded with `current` (or, when it does not count, outside the trial)."""
        if self.done:
            return
        if not self.counts(tokens):
            self._skip = True
            return
        if self._in_window and not self._skip:  # the first step of a window paid for the switch
            self.steps.append((self.current, tokens, seconds))
        self._skip = False
        self._in_window += 1
        if self._in_window >= self.window:
            self._turn, self._in_window = self._turn + 1, 0
            if self.done and self.per_step() is None and not self._extended:
                self._extended, self.rounds = True, self.rounds + MORE_ROUNDS

    def per_step(self) -> dict[Setting, float] | None:
        """Median seconds per step of each candidate, over the steps of the most common size
        (None while a candidate has fewer than two such steps)."""
        if not self.steps:
            return None
        size = Counter(t for _, t, _ in self.steps).most_common(1)[0][0]
        out = {}
        for s in self.candidates:
            times = [sec for got, t, sec in self.steps if got == s and t == size]
            if len(times) < 2:
                return None
            out[s] = statistics.median(times)
        return out

    def winner(self) -> Setting | None:
        """The fastest candidate (None when the steps could not be compared)."""
        times = self.per_step()
        return min(times, key=times.get) if times else None
