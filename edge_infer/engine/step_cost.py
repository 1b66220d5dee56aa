"""What one more token in a decode step costs, to decide whether a draft token pays.

A step's decode time is close to a + b·n for n tokens (a: fixed work per step, b: per
token). A step emits one token per decoding sequence, so a token of this step costs
(a + b·n) / d with d sequences decoding. Verifying one drafted token costs b and pays back a
token with its acceptance chance p, so it is worth it while p ≥ b·d / (a + b·n) = d / (a/b + n).
On 2 CPU cores (Xeon, AMX) with SmolLM2 a step took 13.6 ms for 1 token, 19.0 for 2, 28.3 for
4 (a/b about 1.5): one sequence drafts at p ≥ 0.5 (with MARGIN), eight batched ones never
(their step is already busy computing). A GPU's a/b is large, so drafts there run long.

a and b are fitted online (exponentially weighted least squares over the recent decode
steps); until the steps have varied enough to fit, a/b is PRIOR_RATIO. A draft must earn
MARGIN times what it costs: p is an estimate, and at break-even drafting (SmolLM2 on 2 cores:
a/b = 1.5, so one sequence drafted at p >= 0.4) plain text read 0.93-1.04x of no drafts.
"""

from __future__ import annotations

PRIOR_RATIO = 1.0
DECAY = 0.98        # weight of a step after 50 more: about 1/e
MAX_TOKENS = 64     # larger steps are prompt chunks, whose attention cost is not linear
MIN_SPREAD = 0.25   # variance of n needed before the fit is trusted
MARGIN = 1.25       # expected tokens per drafted token, over its cost, for a draft to pay


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
        return min(1.0, MARGIN * n_decode / (self.ratio() + n_tokens))
