"""The engine: one thread owns the llama.cpp context and runs continuous batching.

Other threads call submit() / cancel() / snapshot(); submit() validates and tokenizes on
the caller's thread so a bad request fails there, before anything reaches llama.cpp.
Each step = one llama_decode over decode tokens plus prompt chunks (Scheduler.plan), run by
ModelRunner; Scheduler.postprocess then decides which sequences end.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from pathlib import Path

from edge_infer.config import EngineSettings
from edge_infer.engine.embedding import Embedder
from edge_infer.engine.inbox import Inbox
from edge_infer.engine.intake import Intake, prime_penalties
from edge_infer.engine.kv.pool import Admission, KvPool
from edge_infer.engine.kv.tiers import TieredCache
from edge_infer.engine.loading import check_settings, load
from edge_infer.engine.postprocess import Outcome
from edge_infer.engine.prompt import BadRequestError, Prompter, read_template_file
from edge_infer.engine.runner import KV_FULL, ModelRunner
from edge_infer.engine.sampling import constrain_to_call
from edge_infer.engine.scheduler import BatchItem, Scheduler
from edge_infer.engine.sequence import Request, Sequence, Status
from edge_infer.engine.snapshot import build_snapshot
from edge_infer.engine.speculation import Speculation
from edge_infer.engine.stats import EngineSnapshot, EngineStats, FinishedRequest
from edge_infer.engine.stream import FinishEvent, FinishReason, RequestStream
from edge_infer.engine.watchdog import StepClock, Watchdog
from edge_infer.errors import EngineClosedError
from edge_infer.gguf.info import read_model_info

log = logging.getLogger("edge_infer.engine")
REFUSALS = {"closed": "the engine is shut down",  # submit() while not serving, by state
            "stalled": "the engine is stalled in a llama.cpp call; retry later",
            "stopped": "the engine thread has stopped (see the log); restart the server"}


class Engine:
    def __init__(self, model_path: str | Path, settings: EngineSettings | None = None,
                 name: str | None = None, identity: str | None = None):  # identity: the file's sha256
        self.settings = s = settings or EngineSettings.from_env()
        check_settings(s)  # before llama.cpp sees them
        template_text = read_template_file(s.chat_template) if s.chat_template else None  # before loading
        self.info = read_model_info(model_path)  # ours first: llama.cpp aborts the process on some bad files
        self.name = name or Path(model_path).stem
        loaded = load(Path(model_path), self.info, s)
        self.placement, self.model, self.ctx = loaded.placement, loaded.model, loaded.ctx
        self.plan, self.backend = self.placement.plan.estimate, self.model.backend
        self.load_log, self.buffers, self.kv_bytes = loaded.load_log, loaded.buffers, loaded.kv_bytes
        self.n_ctx_seq = loaded.n_ctx_seq
        self.prompts = Prompter(self.model, self.info.architecture, template_text, s.reasoning_budget)
        self.template = self.prompts.template
        self.embedder = Embedder(self.model, self.info.architecture, s)  # its context comes on first use
        # An encoder (BERT-style embedder or reranker) cannot generate: llama.cpp would abort.
        self.encoder_only = self.model.meta(f"{self.info.architecture}.attention.causal") == "false"
        self.runner = ModelRunner(self.model, self.ctx, s, warm_up=not self.encoder_only)
        tiers = TieredCache.for_model(Path(model_path), s, identity)
        self.kv = KvPool.for_context(self.ctx, s, self.model.n_swa, tiers)
        self.scheduler = Scheduler(self.kv, min(s.n_batch, self.ctx.n_ctx),  # llama.cpp caps a step there
                                   self.n_ctx_seq, share_prefixes=self.kv.can_share_cells)
        self.stats = EngineStats()  # written by the engine thread only
        self.speculation = Speculation(self.model, s, self.runner, self.kv, self.stats)
        self.intake = Intake(self.model, self.prompts, self.speculation, s, self.n_ctx_seq)
        self.inbox = Inbox(limit=s.parallel + s.queue_size)
        self._closed = False
        self.recent: deque[FinishedRequest] = deque(maxlen=200)  # newest last
        self.clock = StepClock()
        self._thread = threading.Thread(target=self._run, name="edge-infer-engine", daemon=True)
        self._thread.start()
        self.watchdog = Watchdog(self, s.stall_timeout).start()

    # ---- public API (any thread) -----------------------------------------------------
    def tokenize_messages(self, messages: list[dict], tools: list[dict] | None = None) -> list[int]:
        return self.prompts.tokenize_messages(messages, tools)

    def tokenize(self, text: str) -> list[int]:
        return self.prompts.tokenize(text)

    def embed(self, inputs: list[str | list[int]], *, normalize: bool = True, dimensions: int | None = None):
        """(a vector per input, cut to `dimensions`; prompt tokens). Blocks; beside generation."""
        return self.embedder.embed(inputs, normalize, dimensions)

    def rerank(self, query: str, documents: list[str]) -> tuple[list[float], int]:
        """(a relevance score per document, prompt tokens), for a model with rank pooling (can_rerank)."""
        return self.embedder.rerank(query, documents)

    @property
    def embedding_bytes(self) -> int:  # the embedding context's RAM once used (the host counts it)
        return self.embedder.reserve_bytes(self.plan.kv_bytes_per_token)

    @property
    def can_rerank(self) -> bool:
        return self.embedder.can_rerank

    @property
    def embedding_size(self) -> int:  # floats per vector
        return self.embedder.width

    @property
    def embedding_tokens(self) -> int:  # the longest input one vector takes
        return self.embedder.max_tokens

    def submit(self, request: Request) -> RequestStream:
        """Validate, tokenize and queue a request. Raises before queuing if it cannot run."""
        if not self.alive:
            raise EngineClosedError(REFUSALS.get(self.state, REFUSALS["stopped"]))
        if self.encoder_only:
            raise BadRequestError(f"{self.name} is an embedding or reranking model (no causal attention): it "
                                  "cannot generate text; use /v1/embeddings or /v1/rerank")
        seq = self.intake.sequence(request, cancel=lambda: self.cancel(request.id))
        self.inbox.put(seq)
        return seq.stream

    def generate(self, request: Request):
        """Convenience: submit and wait for the whole completion."""
        return self.submit(request).result()

    def cancel(self, request_id: str) -> None:
        self.inbox.cancel(request_id)

    def live_sequences(self) -> list[Sequence]:
        return self.inbox.live()

    def snapshot(self) -> EngineSnapshot:
        """What the engine is doing now: a plain object any thread may read."""
        return build_snapshot(self)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.watchdog.stop()
        self.inbox.wake()
        self._thread.join(timeout=30)
        self.kv.close(persist=not self._thread.is_alive())  # conversations go to disk
        for part in (self.runner, self.embedder, self.ctx, self.model):  # the model last: the others use it
            part.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- engine thread ---------------------------------------------------------------
    @property
    def state(self) -> str:
        """ok | stalled (a step ran past stall_timeout) | stopped (thread died) | closed."""
        if self._closed:
            return "closed"
        if not self._thread.is_alive():
            return "stopped"
        return "stalled" if self.watchdog.stalled.is_set() else "ok"

    @property
    def alive(self) -> bool:
        """False unless serving: /health says so, submit refuses."""
        return self.state == "ok"

    def _run(self) -> None:
        try:
            self._loop()
        finally:
            # However the loop ended (close, or an exception that escaped it), no request
            # may wait forever: every live one, queued or running, gets its end.
            why = "the engine shut down" if self._closed else "the engine stopped"
            for seq in self.live_sequences():
                try:
                    self._finish(seq, "cancelled", error=why)
                except Exception:
                    log.exception("could not finish %s", seq.id)

    def _loop(self) -> None:
        sched = self.scheduler
        while True:
            idle = not sched.running and not sched.waiting
            if not self._take_inbox(block=idle):
                break
            try:
                self._drop_cancelled()
                with self.clock:  # the watchdog times this
                    for admission in sched.admit():
                        self._start(admission)
                    items = sched.plan(drafts=self.runner.spin.trial is None)
                    if items:
                        self._step(items)
                if self.watchdog.stalled.is_set():
                    self._recover()
            except Exception as exc:  # never let the engine thread die silently
                log.exception("engine step failed")
                for seq in list(sched.running):
                    self._fail(seq, f"engine error: {exc}")

    def _take_inbox(self, block: bool) -> bool:
        """Move submissions into the scheduler; False once the engine is closing."""
        for seq in self.inbox.take(block):
            self.scheduler.add(seq)
            self.stats.requests += 1
        return not self._closed

    def _recover(self) -> None:
        """The stalled call returned: free what the watchdog ended, then serve again."""
        self._drop_cancelled()
        log.warning("engine step returned after a stall; serving again")
        self.watchdog.stalled.clear()

    def _drop_cancelled(self) -> None:
        """End requests cancelled by their caller, past their deadline, or ended by the watchdog."""
        for seq in self.scheduler.take_dropped(time.perf_counter()):
            if seq.cancelled or seq.abandoned:  # abandoned: its client already got the watchdog's end
                self._finish(seq, "cancelled")
            else:
                self._finish(seq, "timeout",
                             error=f"the request ran past its deadline of {self.settings.request_timeout} s")

    def _start(self, admission: Admission) -> None:
        """Reuse a cached prefix (the slot's own, a donor's, the prompt cache's), then begin."""
        seq = admission.seq
        keep = self.kv.start(admission)
        seq.n_past = keep
        if seq.preemptions:  # back after a preemption: its sampler and stats began already
            if seq.resumed and seq.prefill_left == 0:  # all of it was still cached
                seq.status = Status.DECODE  # decode on at once with its pending token
            return
        prime_penalties(seq)
        seq.stats.cached_tokens = keep
        seq.stats.started_at = time.perf_counter()
        self.stats.started(len(seq.prompt), keep)

    def _step(self, items: list[BatchItem]) -> None:
        """One step as in nano-vllm: (scheduled by the caller) decode -> sample -> postprocess."""
        items = self.scheduler.make_room(items)
        if not items:
            return
        started = time.perf_counter()
        failed = self.runner.decode(items)
        now = time.perf_counter()
        if failed == KV_FULL and self.scheduler.kv_was_full():  # preempted: the step comes again
            return
        if failed:
            for it in items:
                self.kv.forget(self.kv.slots[it.seq.slot])  # what its cells hold is unknown
                self._fail(it.seq, failed)
            return
        n_tokens = sum(len(it.tokens) for it in items)
        n_drafted = sum(len(it.draft) for it in items)
        n_decode = sum(it.seq.status is Status.DECODE for it in items)
        self.scheduler.step_cost.observe(n_tokens, now - started)
        self.runner.spin.record(n_tokens, now - started)   # the CPU governor's trials
        self.stats.stepped(n_tokens - n_decode - n_drafted, n_decode, now)
        for it in self.scheduler.decoded(items):
            sampled = self.speculation.sample(it) if it.draft else [self.runner.sample(it.seq, it.row)]
            if sampled is None:
                self._fail(it.seq, "llama.cpp could not remove rejected draft tokens from the KV cache")
                continue
            if sampled[0].token is not None:
                self.stats.first_token(it.seq.stats, now)
            for outcome in self.scheduler.postprocess(sampled, self.model):
                self._deliver(outcome)
                if outcome.finish:
                    break  # what was sampled after a stop is not the request's

    def _deliver(self, outcome: Outcome) -> None:
        seq = outcome.seq
        if outcome.event is not None:
            self.stats.generated_tokens += 1
            seq.stream.put(outcome.event)
        if outcome.finish == "error":
            self._fail(seq, outcome.error)
        elif outcome.finish:
            self._finish(seq, outcome.finish, flush=outcome.flush)
        elif outcome.constrain and not constrain_to_call(self.model, seq):  # a tool call began
            self._fail(seq, "the tool-call grammar could not be built")

    def _fail(self, seq: Sequence, message: str) -> None:
        log.warning("request %s failed: %s", seq.id, message)
        self._finish(seq, "error", error=message)

    def _finish(self, seq: Sequence, reason: FinishReason, error: str | None = None, flush: bool = True) -> None:
        if seq.status is Status.FINISHED:
            return
        tail = seq.end(flush)
        self.scheduler.finish(seq)
        self.inbox.done(seq)
        self.recent.append(FinishedRequest.of(seq.id, seq.request.source, reason, seq.stats))
        seq.stream.put(FinishEvent(reason, tail, seq.stats, error, seq.stops.matched))
