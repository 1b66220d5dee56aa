"""OpenAI's streamed chat and text completions: a Job's reply events as `chat.completion.chunk`
or `text_completion` SSE chunks (the shapes: server.openai_wire), driven by generation.stream."""

from __future__ import annotations

from edge_infer.server.faces import OPENAI
from edge_infer.server.generation import Renderer
from edge_infer.server.jobs import Job
from edge_infer.server.openai_wire import DONE, TokenText, sse, usage


class ChunkRenderer(Renderer):
    """Chunks exactly like OpenAI: a role chunk (chat), a chunk per reply event (the first of
    a token's carries its logprobs), a chunk with finish_reason per choice, the usage chunk
    when asked for, then [DONE]. A failure is an `error` event and the stream ends there."""
    face = OPENAI

    def __init__(self, job: Job, wire, text_of: TokenText, echo: list[str] | None = None):
        self.job, self.wire, self.text_of, self.echo = job, wire, text_of, echo
        self.offsets = [len(e) for e in echo] if echo else [0] * len(job.choices)  # legacy text_offset

    def start(self):
        wire, echo = self.wire, self.echo
        for c in self.job.choices:
            opening = wire.opening(c.index)
            if opening is not None:
                yield sse(wire.chunk([opening]))
            if echo:
                yield sse(wire.chunk([wire.delta(c.index, echo[c.index], None)]))

    def token(self, i, tok, events):
        wire, lp = self.wire, None
        if tok is not None and tok.logprobs is not None:
            lp = wire.logprob_entries([(tok.token, tok.logprobs)], self.job.top_logprobs, self.text_of,
                                      self.offsets[i])
            self.offsets[i] += len(self.text_of(tok.token).decode("utf-8", "replace"))
        for ev in events or ([None] if lp is not None else []):  # None: logprobs alone
            if (piece := wire.piece(i, ev, lp)) is not None:
                yield sse(wire.chunk([piece]))
                lp = None

    def end(self, i, end):
        yield sse(self.wire.chunk([self.wire.closing(i, "", end.finish_reason)]))

    def finish(self):
        if self.wire.include_usage:
            yield sse(self.wire.chunk([], usage(*self.job.usage())))
        yield DONE
