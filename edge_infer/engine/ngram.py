"""N-gram drafts for speculative decoding without a second model (prompt lookup).

When the text so far ends with tokens that occurred before (in the prompt or in what was
generated), the tokens that followed them then are a good guess for what follows now:
rewriting, quoting or editing a given text repeats long runs of it. The engine feeds such a
draft with the sequence's next token in one batch and keeps the drafted tokens the model
itself would have sampled (engine/speculation.py), so the output is the same as without.

The index maps every n-gram (n = MIN_N..MAX_N) of the history to where its latest earlier
occurrence continued; it grows as tokens are generated, so a lookup costs O(MAX_N).

How far to draft: verifying a token costs nearly as much as decoding one on a CPU (small
models there are compute-bound), so a draft pays only while its tokens are likely to be
accepted. The drafter keeps `p[n]`, a running estimate of the chance that a drafted token is
accepted after a match of n tokens, and drafts the j-th token only while p[n]**j (the chance
that it and all before it are accepted) is at least the threshold the caller gives
(engine/step_cost.py). Per match length because they differ: on open questions (SmolLM2, bench
plain) drafts after a 2-token match were accepted 40% of the time, after a 4-token one 73%;
one estimate for both let the short matches draft at a loss while the long ones paid.
"""

from __future__ import annotations

MIN_N, MAX_N = 2, 4   # a one-token match guesses too often to pay for its verification
MAX_DRAFT = 32        # tokens drafted per step for one sequence, at most
# p[n] before any evidence, and where it drifts back to while not drafting: about what a match of
# n tokens earned on open questions (bench plain, SmolLM2: 40-46% / 28-59% / 64-73% accepted). Where a step
# is cheap for its fixed cost (a GPU: a low threshold) the short matches draft too.
PRIORS = {2: 0.45, 3: 0.55, 4: 0.75}
ALPHA = 0.15          # weight of each verified token in p[n] (about the last seven count)
RECOVER = 0.02        # per match not worth drafting: p[n] drifts back, so a copy later is found


class NgramDrafter:
    def __init__(self, prompt: list[int], max_draft: int):
        self.max_draft = max_draft
        self.tokens: list[int] = []
        self._index: dict[tuple[int, ...], int] = {}   # n-gram -> index of the token after it
        self.drafted = 0    # tokens proposed, for the acceptance rate
        self.accepted = 0
        self.p = dict(PRIORS)   # acceptance estimate per match length
        self._last_n = MAX_N    # the match length of the last draft, which record() judges
        self.extend(prompt)
        self._prompt_len = len(prompt)

    def extend(self, tokens: list[int]) -> None:
        """Append history. The n-grams ending at the new last token are indexed one token
        later, once they have a continuation (so a lookup finds an earlier occurrence)."""
        toks, index = self.tokens, self._index
        for t in tokens:
            toks.append(t)
            end = len(toks) - 1          # the token at `end` continues the n-grams before it
            for n in range(MIN_N, MAX_N + 1):
                if end - n >= 0:
                    index[tuple(toks[end - n:end])] = end

    def sync(self, generated: list[int]) -> None:
        """Catch up with the tokens generated since the last call."""
        have = len(self.tokens) - self._prompt_len
        if have < len(generated):
            self.extend(generated[have:])

    def draft(self, limit: int, threshold: float = 0.0) -> list[int]:
        """Tokens that followed the longest matching suffix: at most min(limit, max_draft),
        and only as many as are worth verifying at `threshold` (see the module's docstring)."""
        match = self._longest_match()
        if match is None:
            return []
        n, start = match
        worth = self.worth_drafting(threshold, n)
        if worth == 0:
            self.p[n] += RECOVER * (PRIORS[n] - self.p[n])
            return []
        limit = min(limit, self.max_draft, worth)
        if limit <= 0:
            return []
        self._last_n = n
        return self.tokens[start:start + limit]

    def _longest_match(self) -> tuple[int, int] | None:
        """(n, where the continuation starts) for the longest suffix seen before."""
        toks = self.tokens
        if len(toks) < MIN_N + 1:
            return None
        for n in range(MAX_N, MIN_N - 1, -1):
            start = self._index.get(tuple(toks[-n:]))
            if start is not None:
                return n, start
        return None

    def worth_drafting(self, threshold: float, n: int = MAX_N) -> int:
        """The largest j with p[n]**j >= threshold (capped at MAX_DRAFT)."""
        p = self.p[n]
        j, q = 0, p
        while j < MAX_DRAFT and q >= threshold:
            j, q = j + 1, q * p
        return j

    def record(self, drafted: int, accepted: int) -> None:
        """The last draft, verified: its accepted tokens, then (when cut short) one rejection."""
        self.drafted += drafted
        self.accepted += accepted
        n = self._last_n
        for _ in range(accepted):
            self.p[n] += ALPHA * (1.0 - self.p[n])
        if accepted < drafted:
            self.p[n] -= ALPHA * self.p[n]
