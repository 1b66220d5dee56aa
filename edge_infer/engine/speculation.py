"""Speculative decoding with n-gram drafts (engine/ngram.py), batched with everything else.

A drafting sequence feeds [next token] + draft in the step's one llama_decode, with logits
for every position. Its tokens are then sampled position by position through its own
sampler chain while they agree with the draft (ModelRunner.verify), so each emitted token
is the one one-token-at-a-time decoding would have produced, greedy or sampled (the chain
sees the same tokens in the same order). The cells of rejected draft tokens are removed
again (seq_rm of the newest positions), so the KV cache holds exactly the emitted history.
"""

from __future__ import annotations

import logging
import time

from edge_infer.engine.ngram import MAX_DRAFT, NgramDrafter
from edge_infer.engine.postprocess import Sampled
from edge_infer.engine.scheduler import BatchItem
from edge_infer.engine.sequence import Request
from edge_infer.errors import EdgeInferError

log = logging.getLogger("edge_infer.engine")


def check_draft_max(n: int) -> None:
    """Before loading: a clear error for a bad --draft-max."""
    if not 0 <= n <= MAX_DRAFT:
        raise EdgeInferError(f"--draft-max is {n}; give 0 (off) to {MAX_DRAFT}")


class Speculation:
    def __init__(self, model, settings, runner, kv, stats):
        self.default_max = settings.draft_max
        self.runner, self.kv, self.stats = runner, kv, stats
        # Exact only where cells can be cut back: a recurrent state cannot, and a sliding
        # window may already have recycled cells the draft's positions pushed out of it.
        self.supported = not model.recurrent and (model.n_swa == 0 or settings.swa_full)
        if self.default_max and not self.supported:
            log.warning("n-gram speculation is off for this model (%s)",
                        "recurrent" if model.recurrent else "sliding-window attention; --swa-full allows it")

    def draft_max_for(self, request: Request) -> int:
        """Drafted tokens per step: the request's choice or the server's; 0 for forced tokens
        and where speculation cannot run."""
        # Not with a tool-call trigger either: its sampler changes at a token nobody drafted for.
        if request.forced_tokens is not None or not self.supported or request.sampling.call_trigger:
            return 0
        n = self.default_max if request.draft_max is None else request.draft_max
        return max(0, min(n, MAX_DRAFT))

    def drafter_for(self, request: Request, prompt: list[int]) -> NgramDrafter | None:
        n = self.draft_max_for(request)
        return NgramDrafter(prompt, n) if n else None

    def sample(self, it: BatchItem) -> list[Sampled] | None:
        """Verify a decoded draft and drop the rejected tokens' cells. None when llama.cpp
        could not cut them back (the sequence cannot go on)."""
        sampled = self.runner.verify(it)
        seq, n_accepted = it.seq, len(sampled) - 1
        n_rejected = len(it.draft) - n_accepted
        self.stats.draft_tokens += len(it.draft)
        self.stats.draft_accepted += n_accepted
        self.stats.decode_rate.add(n_accepted, time.perf_counter())
        seq.drafter.record(len(it.draft), n_accepted)
        seq.n_past -= n_rejected
        if self.kv.drop_rejected(self.kv.slots[seq.slot], n_rejected):
            return sampled
        return None
