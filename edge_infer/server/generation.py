"""One generation path for every route: a lease on the model's engine, a Job on it, the job
streamed through a face's Renderer or collected whole, and the lease released once the
response is over (also when the client leaves or something fails).

The one stream loop is `stream`: it owns the order of a stream, its errors and its end; a
face's Renderer only says what each step looks like on its wire."""

from __future__ import annotations

import asyncio
from typing import AsyncIterator, Callable, Iterable

from starlette.requests import Request
from starlette.responses import Response

from edge_infer.chat.reply import ReplyEnd, ReplyEvent
from edge_infer.engine import TokenEvent
from edge_infer.server.errors import APIError
from edge_infer.server.faces import Face
from edge_infer.server.jobs import Job, generation_error


class Renderer:
    """One streamed reply in one face's wire (built per request, with its Job): what it sends
    first, for each token's reply events, when a choice ends, when all have, and when the
    generation fails. Each step returns the chunks to send, in order."""
    face: Face  # whose error body ends a stream that fails

    def start(self) -> Iterable[bytes]:
        return ()

    def token(self, i: int, tok: TokenEvent | None, events: list[ReplyEvent]) -> Iterable[bytes]:
        """Choice i's reply events for one token (tok None: what the choice's end released)."""
        return ()

    def end(self, i: int, end: ReplyEnd) -> Iterable[bytes]:
        """Choice i finished (by anything but a failure)."""
        return ()

    def finish(self) -> Iterable[bytes]:
        """Every choice finished."""
        return ()

    def failed(self, i: int, events: list[ReplyEvent], err: APIError) -> Iterable[bytes]:
        """Choice i's generation failed: what its end released, then the face's error; the
        stream ends there."""
        yield from self.token(i, None, events)
        yield self.face.stream_error(err)


async def stream(job: Job, renderer: Renderer) -> AsyncIterator[bytes]:
    """The job's reply events through `renderer`. A failed generation ends the stream with the
    renderer's `failed`, a bug of ours with the face's error chunk; however the stream ends
    (the client left: the response cancels it), the job is cancelled, which frees its slots now."""
    try:
        for chunk in renderer.start():
            yield chunk
        async for i, tok, events in job.replies():
            if tok is not None:
                for chunk in renderer.token(i, tok, events):
                    yield chunk
                continue
            *released, end = events  # a choice's end: what it held back, then its ReplyEnd
            if (err := generation_error(end)) is not None:
                for chunk in renderer.failed(i, released, err):
                    yield chunk
                return
            for chunk in renderer.token(i, None, released):
                yield chunk
            for chunk in renderer.end(i, end):
                yield chunk
        for chunk in renderer.finish():
            yield chunk
    except Exception as exc:  # a bug of ours: still end the stream the way clients understand
        yield renderer.face.stream_error(APIError(500, f"internal error: {exc}"))
    finally:
        job.cancel()


async def generate(srv, request: Request, lease, body, *, renderer: Callable[[Job], Renderer],
                   whole: Callable[[Job], Response], plain: bool = False) -> Response:
    """Submit `body` on the leased engine; answer with the stream of renderer(job) when the
    body asks for a stream, else with whole(job) once every choice has finished."""
    try:
        job = Job(lease.engine, body, plain=plain)
        job.on_finish = lambda ev: ev.stats and srv.metrics.generation(ev.stats, ev.reason)
        job.submit()  # a refusal is raised here, before any response byte
        if body.stream:
            def closed():
                count_if_cancelled(srv, job)
                lease.release()
            render = renderer(job)
            return render.face.streams(stream(job, render), on_close=closed)
        try:
            if not await until_done_or_gone(srv, request, job):
                return Response(status_code=499)  # nobody is listening; uvicorn drops it
        finally:
            lease.release()
        return whole(job)
    except BaseException:
        lease.release()
        raise


async def until_done_or_gone(srv, request: Request, job: Job) -> bool:
    """Collect the whole completion unless the client disconnects first (then cancel)."""
    async def gone():
        while (await request.receive())["type"] != "http.disconnect":
            pass

    work, watch = asyncio.ensure_future(job.collect()), asyncio.ensure_future(gone())
    try:
        await asyncio.wait({work, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
        if not work.done():
            work.cancel()
            job.cancel()
            count_if_cancelled(srv, job)
    if work.done() and not work.cancelled():
        work.result()  # re-raises a generation failure as its APIError
        return True
    return False


def count_if_cancelled(srv, job: Job) -> None:
    if not job.done:
        srv.metrics.cancelled.inc()
