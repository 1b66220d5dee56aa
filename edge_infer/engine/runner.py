"""One step on the model, as nano-vllm's ModelRunner: fill the llama_batch, llama_decode,
sample the rows whose logits were asked for.

The llama.cpp calls of a step live here; what each token means for its sequence (append,
stop, finish) is the scheduler's post-processing. Only the engine thread calls it.
"""

from __future__ import annotations

import numpy as np

from edge_infer.config import EngineSettings
from edge_infer.engine.cpu_share import SpinGovernor
from edge_infer.engine.native.context import LlamaBatch, LlamaContext
from edge_infer.engine.native.llama import LlamaModel
from edge_infer.engine.postprocess import Sampled
from edge_infer.engine.scheduler import BatchItem
from edge_infer.engine.sequence import Sequence


KV_FULL = "the KV cache is full"  # llama_decode returned 1: nothing was decoded, retry with room


class ModelRunner:
    def __init__(self, model: LlamaModel, ctx: LlamaContext, settings: EngineSettings, warm_up: bool = True):
        self.model, self.ctx = model, ctx
        self.batch = LlamaBatch(settings.n_batch)
        # Decoding on fewer of the threadpool's threads from the next step: llama_set_n_threads.
        self.spin = SpinGovernor(settings.poll, ctx.set_poll, enabled=settings.follow_load,
                                 threads=settings.n_threads,
                                 apply_threads=ctx.set_threads)
        if warm_up:
            self.warm_up()

    def warm_up(self) -> None:
        """One throwaway decode at load, as llama-server's default warm-up: the first request
        otherwise pays for touching every weight page and starting the threads (measured on
        SmolLM2, 2 cores: a first 61-token prompt's TTFT 391 ms cold, 312 ms after a 16 ms
        warm-up). Sequence 0's cells are removed again. Not for encoder-only models (llama.cpp
        aborts when they decode)."""
        first = next((t for t in (self.model.bos, self.model.eos) if t >= 0), 0)
        self.batch.clear()
        if self.batch.capacity > 1:  # --n-batch 1 holds one token
            self.batch.add(first, 0, 0, False)
        self.batch.add(self.model.eos if self.model.eos >= 0 else first, self.batch.n, 0, True)
        self.ctx.decode(self.batch)
        self.ctx.seq_rm(0, -1, -1)

    def decode(self, items: list[BatchItem]) -> str | None:
        """One llama_decode over the items (each learns its logits row). None, or what failed."""
        batch = self.batch
        batch.clear()
        for it in items:
            last = len(it.tokens) - 1
            if it.draft:  # every position is sampled to verify the draft
                it.rows = [batch.add(tok, it.pos + j, it.seq.slot, True) for j, tok in enumerate(it.tokens)]
                it.row = it.rows[-1]
                continue
            for j, tok in enumerate(it.tokens):
                it.row = batch.add(tok, it.pos + j, it.seq.slot, it.wants_logits and j == last)
        self.spin.tick(batch.n)
        rc = self.ctx.decode(batch)
        if rc == 0:
            return None
        return KV_FULL if rc == 1 else f"llama_decode returned {rc}"

    def sample(self, seq: Sequence, row: int) -> Sampled:
        forced = seq.request.forced_tokens
        if forced is not None:
            token = forced[len(seq.generated)]
        elif seq.forced_next:  # the engine writes these itself (a reasoning budget ran out)
            token = seq.forced_next.pop(0)
            if seq.sampler is not None:
                seq.sampler.accept(token)
        elif seq.params.grammar:  # None when the grammar allows nothing
            token = seq.sampler.sample_checked(self.ctx, row, self.model.n_vocab)
        else:
            token = seq.sampler.sample(self.ctx, row)
        if token is None:
            return Sampled(seq, None)
        return Sampled(seq, token, self.logprobs(row) if seq.request.capture_logprobs else None)

    def verify(self, it: BatchItem) -> list[Sampled]:
        """Sample position by position while the model agrees with the draft: the sampled
        tokens (each accepted draft token, then the model's own next one) are exactly what
        decoding one token at a time would have produced, the sampler chain seeing each."""
        out = []
        for j, row in enumerate(it.rows):
            s = self.sample(it.seq, row)
            out.append(s)
            if s.token is None or j == len(it.draft) or s.token != it.draft[j]:
                break
        return out

    def logprobs(self, row: int) -> np.ndarray:
        """Log-softmax of one row's logits over the whole vocabulary."""
        logits = np.ctypeslib.as_array(self.ctx.logits_ptr(row), shape=(self.model.n_vocab,))
        x = logits.astype(np.float64)
        x -= x.max()
        return (x - np.log(np.exp(x).sum())).astype(np.float32)

    def close(self) -> None:
        self.spin.close()
        self.batch.close()
