"""The engine: one thread owns the llama.cpp context and runs continuous batching.

Other threads call submit() / cancel() / snapshot(); submit() validates and tokenizes on
the caller's thread so a bad request fails there, before anything reaches llama.cpp.
Each step = one llama_decode over decode tokens plus prompt chunks (see Scheduler.plan).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from pathlib import Path

import numpy as np
import psutil

from edge_infer.config import EngineSettings
from edge_infer.engine.llama import (ContextParams, LlamaBatch, LlamaContext, LlamaModel,
                                     capture_log)
from edge_infer.engine.load_report import kv_bytes_reported
from edge_infer.engine.prompt import BadRequestError, Prompter
from edge_infer.engine.sampling import build_sampler
from edge_infer.engine.scheduler import Admission, BatchItem, Scheduler, Slot
from edge_infer.engine.sequence import Request, Sequence, Status
from edge_infer.engine.snapshot import build_snapshot
from edge_infer.engine.stats import EngineSnapshot, FinishedRequest, RateMeter
from edge_infer.engine.stream import FinishEvent, RequestStream, TokenEvent
from edge_infer.engine.watchdog import StepClock, Watchdog
from edge_infer.errors import ContextOverflowError, EngineClosedError, QueueFullError
from edge_infer.gguf.info import read_model_info

log = logging.getLogger("edge_infer.engine")


class Engine:
    def __init__(self, model_path: str | Path, settings: EngineSettings | None = None,
                 name: str | None = None):
        self.settings = s = settings or EngineSettings.from_env()
        # Validate the file ourselves first: llama.cpp aborts the process on some bad files.
        self.info = read_model_info(model_path)
        self.name = name or Path(model_path).stem
        with capture_log() as load_log:
            self.model = LlamaModel(Path(model_path), n_gpu_layers=s.n_gpu_layers)
            self.ctx = LlamaContext(self.model, ContextParams(
                n_ctx=s.ctx * s.parallel, n_seq_max=s.parallel, n_batch=s.n_batch,
                n_threads=s.n_threads, kv_unified=s.kv_unified, swa_full=s.swa_full,
                flash_attn=s.flash_attn))
        self.load_log = load_log  # llama.cpp's own report of its buffers
        self.backend = self.model.backend
        self.kv_bytes = kv_bytes_reported(load_log)
        # What one sequence may hold. With a unified KV cache llama.cpp would let one
        # sequence take every cell; capping each at `ctx` means the cells never run out.
        self.n_ctx_seq = min(s.ctx, self.ctx.n_ctx_seq)
        self.prompts = Prompter(self.model, self.info.architecture)
        self.template = self.prompts.template
        self.batch = LlamaBatch(s.n_batch)
        # Sharing cells between sequences needs one unified buffer; with sliding-window
        # layers a shared cell could not be recycled by the window, so those models keep
        # to per-slot reuse.
        self.scheduler = Scheduler(s.parallel, s.n_batch,
                                   share_prefixes=s.kv_unified and self.model.n_swa == 0)
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._live: dict[str, Sequence] = {}  # submitted and not finished
        self._closed = False
        self._decode_rate, self._prefill_rate = RateMeter(), RateMeter()
        self._totals = {"requests": 0, "prompt": 0, "prompt_eval": 0, "generated": 0}
        self._ttfts: deque[float] = deque(maxlen=100)
        self.recent: deque[FinishedRequest] = deque(maxlen=200)  # newest last
        self._proc = psutil.Process()
        self.clock = StepClock()
        self._thread = threading.Thread(target=self._run, name="edge-infer-engine", daemon=True)
        self._thread.start()
        self.watchdog = Watchdog(self, s.stall_timeout).start()

    # ---- public API (any thread) -----------------------------------------------------
    def tokenize_messages(self, messages: list[dict]) -> list[int]:
        return self.prompts.tokenize_messages(messages)

    def tokenize(self, text: str) -> list[int]:
        return self.prompts.tokenize(text)

    def submit(self, request: Request) -> RequestStream:
        """Validate, tokenize and queue a request. Raises before queuing if it cannot run."""
        if not self.alive:
            raise EngineClosedError({"closed": "the engine is shut down",
                                     "stalled": "the engine is stalled in a llama.cpp call; retry later",
                                     }.get(self.state, "the engine thread has stopped (see the log); "
                                                       "restart the server"))
        tokens = self.prompts.tokens_for(request)
        need = len(tokens) + len(request.forced_tokens or [])
        if len(tokens) >= self.n_ctx_seq or need > self.n_ctx_seq:
            raise ContextOverflowError(need if request.forced_tokens else len(tokens), self.n_ctx_seq)
        try:
            sampler = None if request.forced_tokens is not None else build_sampler(self.model, request.sampling)
        except ValueError as exc:
            raise BadRequestError(str(exc)) from exc
        stream = RequestStream(request.id, cancel=lambda: self.cancel(request.id))
        seq = Sequence(request, tokens, stream, sampler)
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
        self.batch.close()
        self.ctx.close()
        self.model.close()

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
                self._totals["requests"] += 1
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
        now = time.perf_counter()

        def dropped(s: Sequence) -> bool:
            return s.cancelled or s.abandoned or now > s.deadline

        for seq in [s for s in self.scheduler.waiting if dropped(s)]:
            self.scheduler.remove_waiting(seq)
            self._end_dropped(seq)
        for seq in [s for s in self.scheduler.running if dropped(s)]:
            self._end_dropped(seq)

    def _end_dropped(self, seq: Sequence) -> None:
        if seq.cancelled or seq.abandoned:  # abandoned: its client already got the watchdog's end
            self._finish(seq, "cancelled")
        else:
            self._finish(seq, "timeout",
                         error=f"the request ran past its deadline of {self.settings.request_timeout} s")

    def _start(self, admission: Admission) -> None:
        """Reuse a cached prefix (the slot's own or a donor's) when llama.cpp holds all it needs."""
        seq, slot, keep, donor = admission.seq, admission.slot, admission.keep, admission.donor
        n_swa = self.model.n_swa
        if donor is not None:
            self._forget(slot)
            self.ctx.seq_cp(donor.id, slot.id, 0, keep)
            slot.share(donor, keep)
        elif keep > 0 and n_swa > 0 and self.ctx.seq_pos_min(slot.id) > max(0, keep - n_swa):
            keep = 0  # sliding-window cache already dropped positions the suffix attends to
        if keep < len(slot.cached):
            if self.ctx.seq_rm(slot.id, keep, -1):
                slot.trim(keep)
            else:
                self._forget(slot)  # removing a whole sequence never fails
                keep = 0
        seq.n_past = keep
        p = seq.params
        if seq.sampler is not None and p.penalized and not p.grammar:
            # Penalties see the end of the prompt too, as llama.cpp's server does, so a reply
            # does not parrot the question. (A grammar sampler must only see generated text.)
            for token in seq.prompt[-p.repeat_last_n:]:
                seq.sampler.accept(token)
        seq.stats.cached_tokens = keep
        seq.stats.started_at = time.perf_counter()
        self._totals["prompt"] += len(seq.prompt)
        self._totals["prompt_eval"] += len(seq.prompt) - keep

    def _forget(self, slot: Slot) -> None:
        """Empty a slot's KV cells and its record of them (slot.cached mirrors the cache)."""
        self.ctx.seq_rm(slot.id, -1, -1)
        slot.trim(0)

    def _step(self, items: list[BatchItem]) -> None:
        batch = self.batch
        batch.clear()
        rows = []
        for it in items:
            last = len(it.tokens) - 1
            for j, tok in enumerate(it.tokens):
                row = batch.add(tok, it.pos + j, it.seq.slot, it.wants_logits and j == last)
            rows.append(row)
        rc = self.ctx.decode(batch)
        if rc != 0:
            reason = "the KV cache is full" if rc == 1 else f"llama_decode returned {rc}"
            for it in items:
                self._forget(self.scheduler.slots[it.seq.slot])
                self._fail(it.seq, reason)
            return
        now = time.perf_counter()
        n_prefill = n_decode = 0
        for it, row in zip(items, rows):
            seq = it.seq
            self.scheduler.slots[seq.slot].extend(it.tokens)
            seq.n_past += len(it.tokens)
            if seq.status is Status.PREFILL:
                n_prefill += len(it.tokens)
                if not it.wants_logits:
                    continue
                seq.status = Status.DECODE
            else:
                n_decode += 1
            self._sample(seq, row, now)
        if n_prefill:
            self._prefill_rate.add(n_prefill, now)
        if n_decode:
            self._decode_rate.add(n_decode, now)

    def _sample(self, seq: Sequence, row: int, now: float) -> None:
        forced = seq.request.forced_tokens
        grammar = seq.params.grammar
        if forced is not None:
            token = forced[len(seq.generated)]
        elif grammar:
            token = seq.sampler.sample_checked(self.ctx, row, self.model.n_vocab)
            if token is None:  # nothing allowed: the sequence cannot make progress
                self._fail(seq, "the grammar allows no token this model can produce at this point")
                return
        else:
            token = seq.sampler.sample(self.ctx, row)
        logprobs = self._logprobs(row) if seq.request.capture_logprobs else None
        if not seq.stats.first_token_at:
            seq.stats.first_token_at = now
            self._ttfts.append(now - seq.stats.queued_at)
        # A grammar offers end-of-generation only once it is complete: nothing can follow,
        # so ignore_eos does not apply to it.
        if forced is None and (grammar or not seq.params.ignore_eos) and self.model.is_eog(token):
            self._finish(seq, "stop")
            return
        seq.generated.append(token)
        self._totals["generated"] += 1
        text, stopped = seq.stops.feed(seq.utf8.feed(self.model.token_to_bytes(token)))
        seq.stream.put(TokenEvent(token, text, logprobs))
        n = len(seq.generated)
        if stopped:
            self._finish(seq, "stop", flush=False)
        elif (forced is not None and n >= len(forced)) or (seq.params.max_tokens and n >= seq.params.max_tokens):
            self._finish(seq, "length")
        elif seq.n_past >= self.n_ctx_seq:  # no room left to feed this token back
            self._finish(seq, "length")
        else:
            seq.next_token = token

    def _logprobs(self, row: int) -> np.ndarray:
        logits = np.ctypeslib.as_array(self.ctx.logits_ptr(row), shape=(self.model.n_vocab,))
        x = logits.astype(np.float64)
        x -= x.max()
        return (x - np.log(np.exp(x).sum())).astype(np.float32)

    def _fail(self, seq: Sequence, message: str) -> None:
        log.warning("request %s failed: %s", seq.id, message)
        self._finish(seq, "error", error=message)

    def _finish(self, seq: Sequence, reason: str, error: str | None = None, flush: bool = True) -> None:
        if seq.status is Status.FINISHED:
            return
        seq.stats.finished_at = time.perf_counter()
        seq.stats.generated_tokens = len(seq.generated)
        tail = ""
        if flush:
            tail, stopped = seq.stops.feed(seq.utf8.flush())
            if not stopped:
                tail += seq.stops.flush()
        self.scheduler.finish(seq)
        if seq.sampler is not None:
            seq.sampler.close()
            seq.sampler = None
        with self._lock:
            self._live.pop(seq.id, None)
        st = seq.stats
        self.recent.append(FinishedRequest(seq.id, seq.request.source, reason, st.prompt_tokens, st.cached_tokens,
                                           st.generated_tokens, st.ttft_s, st.decode_tok_s, time.time()))
        seq.stream.put(FinishEvent(reason, tail, seq.stats, error))
