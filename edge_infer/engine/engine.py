"""The engine: one thread owns the llama.cpp context and runs continuous batching.

Other threads call submit() / cancel() / snapshot(); submit() validates and tokenizes on
the caller's thread so a bad request fails there, before anything reaches llama.cpp.
Each step = one llama_decode over decode tokens plus prompt chunks (Scheduler.plan), run by
ModelRunner; Scheduler.postprocess then decides which sequences end.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from pathlib import Path

from edge_infer.config import EngineSettings
from edge_infer.plan.kv_types import check_kv_types, ggml_type
from edge_infer.engine.embedding import Embedder
from edge_infer.engine.llama import ContextParams, LlamaContext, capture_log
from edge_infer.engine.placement import load_model, place
from edge_infer.engine.load_report import device_buffers, kv_bytes_reported
from edge_infer.engine.postprocess import Outcome
from edge_infer.engine.prompt import BadRequestError, Prompter, read_template_file
from edge_infer.engine.cache_tiers import build_tiers
from edge_infer.engine.runner import KV_FULL, ModelRunner
from edge_infer.engine.sampling import build_sampler, constrain_to_call
from edge_infer.engine.scheduler import Admission, BatchItem, Scheduler
from edge_infer.engine.slot_memory import SlotMemory
from edge_infer.engine.sequence import Request, Sequence, Status
from edge_infer.engine.speculation import Speculation, check_draft_max
from edge_infer.engine.snapshot import build_snapshot
from edge_infer.engine.stats import EngineSnapshot, EngineStats, FinishedRequest
from edge_infer.engine.stream import FinishEvent, FinishReason, RequestStream
from edge_infer.engine.watchdog import StepClock, Watchdog
from edge_infer.errors import ContextOverflowError, EdgeInferError, EngineClosedError, QueueFullError
from edge_infer.gguf.info import read_model_info

log = logging.getLogger("edge_infer.engine")


class Engine:
    def __init__(self, model_path: str | Path, settings: EngineSettings | None = None,
                 name: str | None = None, identity: str | None = None):  # identity: the file's sha256
        self.settings = s = settings or EngineSettings.from_env()
        check_kv_types(s.cache_type_k, s.cache_type_v, s.flash_attn)  # before llama.cpp sees them
        check_draft_max(s.draft_max)
        if not -1 <= s.poll <= 100:
            raise EdgeInferError(f"--poll must be -1 (no persistent threadpool) or 0..100, not {s.poll}")
        s.check_sizes()
        template_text = read_template_file(s.chat_template) if s.chat_template else None  # before loading
        # Validate the file ourselves first: llama.cpp aborts the process on some bad files.
        self.info = read_model_info(model_path)
        self.name = name or Path(model_path).stem
        if s.kv_budget and not s.kv_unified:
            raise EdgeInferError("--kv-budget sizes the shared KV pool: drop --kv-split")
        # The memory plan sizes the pool (--kv-budget, default two contexts) and places the layers
        # on llama.cpp's devices: one source of truth for `inspect`, the fit verdicts and llama.cpp.
        self.placement = place(self.info, s)
        self.plan = self.placement.plan.estimate
        with capture_log() as load_log:
            self.model = load_model(Path(model_path), self.placement, load_log)
            self.ctx = LlamaContext(self.model, ContextParams(
                n_ctx=self.plan.n_ctx, n_seq_max=s.parallel, n_batch=s.n_batch,
                n_threads=s.n_threads, kv_unified=s.kv_unified, swa_full=s.swa_full,
                flash_attn=s.flash_attn, type_k=ggml_type(s.cache_type_k),
                type_v=ggml_type(s.cache_type_v), poll=s.poll, op_offload=self.placement.n_gpu_layers != 0))
        self.load_log, self.buffers = load_log, device_buffers(load_log)  # llama.cpp's report of its buffers
        self.backend, self.kv_bytes = self.model.backend, kv_bytes_reported(load_log)
        # What one sequence may hold: `ctx`, or the whole pool when it is smaller.
        self.n_ctx_seq = min(s.ctx, self.ctx.n_ctx_seq)
        self.pool_cells = self.ctx.n_ctx if s.kv_unified else None  # llama.cpp caps n_batch there too
        if self.n_ctx_seq < s.ctx:
            log.warning("the KV pool holds %d cells, fewer than --ctx %d: each request is capped at %d",
                        self.ctx.n_ctx, s.ctx, self.n_ctx_seq)
        self.prompts = Prompter(self.model, self.info.architecture, template_text, s.reasoning_budget)
        self.embedder = Embedder(self.model, self.info.architecture, s)  # its context comes on first use
        # An encoder (BERT-style embedder or reranker) cannot generate: llama.cpp would abort.
        self.encoder_only = self.model.meta(f"{self.info.architecture}.attention.causal") == "false"
        self.template = self.prompts.template
        self.runner = ModelRunner(self.model, self.ctx, s, warm_up=not self.encoder_only)
        # Sharing cells between sequences needs one unified buffer; with sliding-window
        # layers a shared cell could not be recycled by the window, so those models keep
        # to per-slot reuse.
        self.prompt_cache, self.disk_cache = build_tiers(Path(model_path), s, identity)
        self.scheduler = Scheduler(s.parallel, min(s.n_batch, self.ctx.n_ctx), n_ctx_seq=self.n_ctx_seq,
                                   share_prefixes=s.kv_unified and self.model.n_swa == 0, pool_cells=self.pool_cells)
        self.memory = SlotMemory(self.ctx, self.scheduler, self.prompt_cache, self.model.n_swa, self.disk_cache)
        sched = self.scheduler
        sched.evict, sched.forget, sched.cached_prefix = self.memory.evict, self.memory.forget, self.memory.cached_prefix
        self.stats = EngineStats()  # written by the engine thread only
        self.speculation = Speculation(self.model, s, self.runner, self.memory, self.scheduler, self.stats)
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._live: dict[str, Sequence] = {}  # submitted and not finished
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

    # The embedding context's RAM once used (the model host adds it to this model's footprint),
    # what it can do, its vectors' width and the longest input one vector takes.
    embedding_bytes = property(lambda self: self.embedder.reserve_bytes(self.plan.kv_bytes_per_token))
    can_rerank = property(lambda self: self.embedder.can_rerank)
    embedding_size = property(lambda self: self.embedder.width)
    embedding_tokens = property(lambda self: self.embedder.max_tokens)

    def submit(self, request: Request) -> RequestStream:
        """Validate, tokenize and queue a request. Raises before queuing if it cannot run."""
        if not self.alive:
            raise EngineClosedError({"closed": "the engine is shut down",
                                     "stalled": "the engine is stalled in a llama.cpp call; retry later",
                                     }.get(self.state, "the engine thread has stopped (see the log); "
                                                       "restart the server"))
        if self.encoder_only:
            raise BadRequestError(f"{self.name} is an embedding or reranking model (no causal attention): it "
                                  "cannot generate text; use /v1/embeddings or /v1/rerank")
        tokens = self.prompts.tokens_for(request)
        need = len(tokens) + len(request.forced_tokens or [])
        if len(tokens) >= self.n_ctx_seq or need > self.n_ctx_seq:
            raise ContextOverflowError(need if request.forced_tokens else len(tokens), self.n_ctx_seq,
                                       "raise --kv-budget" if self.n_ctx_seq < self.settings.ctx else "raise --ctx")
        try:
            sampler = None if request.forced_tokens is not None else build_sampler(self.model, request.sampling)
        except ValueError as exc:
            raise BadRequestError(str(exc)) from exc
        stream = RequestStream(request.id, cancel=lambda: self.cancel(request.id), prompt_tokens=len(tokens))
        seq = Sequence(request, tokens, stream, sampler, self.prompts.think_budget(request))
        seq.drafter = self.speculation.drafter_for(request, tokens)  # a long prompt indexed here, not on the engine thread
        if self.settings.request_timeout > 0:
            seq.deadline = seq.stats.queued_at + self.settings.request_timeout
        with self._lock:
            if len(self._live) >= self.settings.parallel + self.settings.queue_size:
                if sampler:
                    sampler.close()
                raise QueueFullError(f"{len(self._live)} requests in flight; the queue is full, retry later")
            self._live[request.id] = seq
        self._inbox.put(seq)
        return stream

    def generate(self, request: Request):
        """Convenience: submit and wait for the whole completion."""
        return self.submit(request).result()

    def cancel(self, request_id: str) -> None:
        with self._lock:
            seq = self._live.get(request_id)
        if seq is not None:
            seq.cancelled = True
            self._inbox.put(None)  # wake the engine if it sleeps

    def live_sequences(self) -> list[Sequence]:
        with self._lock:
            return list(self._live.values())

    def snapshot(self) -> EngineSnapshot:
        """What the engine is doing now: a plain object any thread may read."""
        return build_snapshot(self)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.watchdog.stop()
        self._inbox.put(None)
        self._thread.join(timeout=30)
        self.memory.close(persist=not self._thread.is_alive())  # conversations go to disk
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
                    items = sched.plan()
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
        try:
            item = self._inbox.get() if block else self._inbox.get_nowait()
        except queue.Empty:
            return not self._closed
        while True:
            if item is not None:
                self.scheduler.add(item)
                self.stats.requests += 1
            try:
                item = self._inbox.get_nowait()
            except queue.Empty:
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
        keep = self.memory.start(admission)
        seq.n_past = keep
        if seq.preemptions:  # back after a preemption: its sampler and stats began already
            if seq.resumed and seq.prefill_left == 0:  # all of it was still cached
                seq.status = Status.DECODE  # decode on at once with its pending token
            return
        p = seq.params
        if seq.sampler is not None and p.penalized and not p.grammar:
            # Penalties see the end of the prompt too, as llama.cpp's server does, so a reply
            # does not parrot the question. (A grammar sampler must only see generated text.)
            for token in seq.prompt[-p.repeat_last_n:]:
                seq.sampler.accept(token)
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
                self.memory.reset_failed(self.scheduler.slots[it.seq.slot])
                self._fail(it.seq, failed)
            return
        n_tokens = sum(len(it.tokens) for it in items)
        n_drafted = sum(len(it.draft) for it in items)
        n_decode = sum(it.seq.status is Status.DECODE for it in items)
        self.scheduler.step_cost.observe(n_tokens, now - started)
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
        with self._lock:
            self._live.pop(seq.id, None)
        self.recent.append(FinishedRequest.of(seq.id, seq.request.source, reason, seq.stats))
        seq.stream.put(FinishEvent(reason, tail, seq.stats, error, seq.stops.matched))
