"""What a decode step of n tokens costs, to decide how long a draft to verify.

A step of n tokens in which d sequences decode emits d tokens; a draft of L more tokens for one
of them emits on average d + p + p^2 + ... + p^L (p: the chance each drafted token is accepted,
engine/ngram.py) at the cost of a step of n + L tokens. So the draft length is the L (0 to the
limit) with the most expected tokens per second, E(L) / cost(n + L), and a draft is made only when
that beats no draft by GAIN.

cost(n) is the measured median-ish time of recent steps of exactly n tokens where there are some
(kernels do not scale linearly: on AMD Zen 4 with repacked Q4_K weights a 16-token step of
qwen-coder took 7-8 one-token steps' time but a 17-token one 8-9, and 4-5 without repacking), else a
line a + b·n fitted online (exponentially weighted least squares over recent steps), else, until
the steps have varied enough to fit, the prior a/b = PRIOR_RATIO. On 2 Xeon cores (AMX) SmolLM2's
steps took 13.6 ms for 1 token, 19.0 for 2, 28.3 for 4 (a/b about 1.5): drafts pay there at
moderate acceptance; where a batch of n costs nearly n single steps (AMD, repacked) only long,
near-certain copies pay, and anything less drafts nothing. A GPU's a/b is large: long drafts.
"""

from __future__ import annotations

PRIOR_RATIO = 1.0
DECAY = 0.98        # weight of a step after 50 more: about 1/e
MAX_TOKENS = 64     # larger steps are prompt chunks, whose attention cost is not linear
MIN_SPREAD = 0.25   # variance of n needed before the fit is trusted
GAIN = 1.15         # a draft must promise this many times the tokens per second of none (p is an estimate)
BY_N_WEIGHT = 0.2   # weight of the newest step in the time kept for its size
MIN_SEEN = 3        # steps of a size before its own time is used instead of the line


class StepCost:
    def __init__(self, prior_ratio: float = PRIOR_RATIO):
        self.prior_ratio = prior_ratio
        self._w = self._n = self._t = self._nn = self._nt = 0.0
        self._by_n: dict[int, tuple[float, int]] = {}   # n -> (smoothed seconds, steps seen)

    def observe(self, n_tokens: int, seconds: float) -> None:
        if not 0 < n_tokens <= MAX_TOKENS or seconds <= 0:
            return
        d = DECAY
        self._w = self._w * d + 1.0
        self._n = self._n * d + n_tokens
        self._t = self._t * d + seconds
        self._nn = self._nn * d + n_tokens * n_tokens
        self._nt = self._nt * d + n_tokens * seconds
        kept, seen = self._by_n.get(n_tokens, (seconds, 0))
        self._by_n[n_tokens] = (kept + BY_N_WEIGHT * (seconds - kept), seen + 1)

    def line(self) -> tuple[float, float]:
        """(a, b) of the fitted line; the prior ratio scaled to the mean step while there is too
        little spread in n to fit (relative costs are what a draft's length needs)."""
        if self._w < 1:
            return self.prior_ratio, 1.0
        mean_n, mean_t = self._n / self._w, self._t / self._w
        var = self._nn / self._w - mean_n * mean_n
        if self._w >= 2 and var >= MIN_SPREAD:
            b = (self._nt / self._w - mean_n * mean_t) / var
            a = mean_t - b * mean_n
            if b > 0:  # a below 0: tokens are all the cost (a/b 0); above 50 b: a GPU, call it 50
                a = min(max(a, 0.0), 50.0 * b)
                return a, b
        b = mean_t / (self.prior_ratio + mean_n)
        return self.prior_ratio * b, b

    def ratio(self) -> float:
        """a/b of the line (the prior's while it cannot be fitted)."""
        a, b = self.line()
        return a / b

    def cost(self, n_tokens: int) -> float:
        """Seconds for a step of n tokens: as measured where steps of that size were seen, else
        the line's."""
        kept, seen = self._by_n.get(n_tokens, (0.0, 0))
        if seen >= MIN_SEEN:
            return kept
        a, b = self.line()
        return a + b * n_tokens

    def draft_length(self, p: float, limit: int, *, n_tokens: int, n_decode: int) -> int:
        """How many tokens to draft for one sequence in a step of n_tokens tokens of which
        n_decode emit one, each drafted token accepted with chance p (after the ones before
        it): the length with the most expected tokens per second, 0 unless that beats no draft
        by GAIN (see the module's docstring)."""
        if n_decode <= 0 or limit <= 0 or p <= 0:
            return 0
        best, best_rate = 0, GAIN * n_decode / self.cost(n_tokens)
        expected, q = float(n_decode), 1.0
        for length in range(1, limit + 1):
            q *= p
            expected += q
            rate = expected / self.cost(n_tokens + length)
            if rate > best_rate:
                best, best_rate = length, rate
        return best
