"""What one more token in a decode step costs, to decide whether a draft token pays.

A step's decode time is close to a + b·n for n tokens (a: fixed work per step, b: per
token). A step emits one token per decoding sequence, so a token of this step costs
(a + b·n) / d with d sequences decoding. Verifying one drafted token costs b and pays back a
token with its acceptance chance p, so it is worth it while p ≥ b·d / (a + b·n) = d / (a/b + n).
On 2 CPU cores with SmolLM2 a/b is about 0.5: one sequence drafts at p ≥ 0.67, eight batched
ones need p ≥ 0.94 (their step is already busy computing). A GPU's a/b is large, so drafts
there run long.

a and b are fitted online (exponentially weighted least squares over the recent decode
steps); until the steps have varied enough to fit, a/b is PRIOR_RATIO.
"""

from __future__ import annotations

PRIOR_RATIO = 1.0
DECAY = 0.98        # weight of a step after 50 more: about 1/e
MAX_TOKENS = 64     # larger steps are prompt chunks, whose attention cost is not linear
MIN_SPREAD = 0.25   # variance of n needed before the fit is trusted


class StepCost:
    def __init__(self, prior_ratio: float = PRIOR_RATIO):
        self.prior_ratio = prior_ratio
        self._w = self._n = self._t = self._nn = self._nt = 0.0

    def observe(self, n_tokens: int, seconds: float) -> None:
        if not 0 < n_tokens <= MAX_TOKENS or seconds <= 0:
            return
        d = DECAY
        self._w = self._w * d + 1.0
        self._n = self._n * d + n_tokens
        self._t = self._t * d + seconds
        self._nn = self._nn * d + n_tokens * n_tokens
        self._nt = self._nt * d + n_tokens * seconds

    def ratio(self) -> float:
        """a/b of the fit, or the prior while there is too little spread in n to fit it."""
        if self._w < 2:
            return self.prior_ratio
        mean_n, mean_t = self._n / self._w, self._t / self._w
        var = self._nn / self._w - mean_n * mean_n
        if var < MIN_SPREAD:
            return self.prior_ratio
        b = (self._nt / self._w - mean_n * mean_t) / var
        if b <= 0:
            return self.prior_ratio
        a = mean_t - b * mean_n
        return min(max(a / b, 0.0), 50.0)

    def threshold(self, n_tokens: int, n_decode: int) -> float:
        """The acceptance chance a drafted token needs in a step of n_tokens tokens of which
        n_decode emit one (see the module's docstring)."""
        if n_decode <= 0:
            return 1.0
        return min(1.0, n_decode / (self.ratio() + n_tokens))
