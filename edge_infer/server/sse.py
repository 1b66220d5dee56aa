"""Server-sent events: the streamed form of a Job, and a response that notices a client
leaving even while nothing is being written (a queued request writes nothing)."""

from __future__ import annotations

from typing import AsyncIterator

import anyio
from starlette.responses import StreamingResponse

from edge_infer.chat.reply import ReplyEnd
from edge_infer.server.errors import APIError
from edge_infer.server.jobs import Job, generation_error
from edge_infer.server.openai_wire import DONE, TokenText, sse, usage


class SSEResponse(StreamingResponse):
    media_type = "text/event-stream"

    def __init__(self, content, on_close=None):
        super().__init__(content, headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        self._on_close = on_close

    async def __call__(self, scope, receive, send) -> None:
        # Starlette only listens for http.disconnect on ASGI < 2.4 and otherwise learns of
        # it from the next failed write; we always listen, so cancelling is immediate.
        try:
            async with anyio.create_task_group() as tg:
                async def stream() -> None:
                    try:
                        await self.stream_response(send)
                    except OSError:  # the client went away mid-write
                        pass
                    tg.cancel_scope.cancel()

                tg.start_soon(stream)
                await self.listen_for_disconnect(receive)
                tg.cancel_scope.cancel()
        finally:
            if self._on_close:
                self._on_close()


async def stream_job(job: Job, wire, text_of: TokenText, echo: list[str] | None = None) -> AsyncIterator[bytes]:
    """Chunks exactly like OpenAI: a role chunk (chat), a chunk per reply event (the first of
    a token's carries its logprobs), a chunk with finish_reason per choice, the usage chunk
    when asked for, then [DONE]. An engine failure becomes an `error` event and the stream
    ends there."""
    try:
        for c in job.choices:
            opening = wire.opening(c.index)
            if opening is not None:
                yield sse(wire.chunk([opening]))
            if echo:
                yield sse(wire.chunk([wire.delta(c.index, echo[c.index], None)]))
        offsets = [len(e) for e in echo] if echo else [0] * len(job.choices)  # legacy text_offset
        k = job.top_logprobs
        async for i, tok, events in job.replies():
            lp = None
            if tok is not None and tok.logprobs is not None:
                lp = wire.logprob_entries([(tok.token, tok.logprobs)], k, text_of, offsets[i])
                offsets[i] += len(text_of(tok.token).decode("utf-8", "replace"))
            for ev in events or ([None] if lp is not None else []):  # None: logprobs alone
                if isinstance(ev, ReplyEnd):
                    err = generation_error(ev)
                    if err is not None:
                        yield sse(err.body(), event="error")
                        return
                    yield sse(wire.chunk([wire.closing(i, "", ev.finish_reason)]))
                elif (piece := wire.piece(i, ev, lp)) is not None:
                    yield sse(wire.chunk([piece]))
                    lp = None
        if wire.include_usage:
            yield sse(wire.chunk([], usage(*job.usage())))
        yield DONE
    except Exception as exc:  # a bug of ours: still end the stream the way clients understand
        yield sse(APIError(500, f"internal error: {exc}").body(), event="error")
    finally:
        job.cancel()  # the client left or something broke: free the slots now
