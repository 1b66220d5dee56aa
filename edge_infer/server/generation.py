"""One generation path for every route: a lease on the model's engine, a Job on it, the job
streamed through a face's renderer or collected whole, and the lease released once the
response is over (also when the client leaves or something fails)."""

from __future__ import annotations

import asyncio
from typing import AsyncIterator, Callable

from starlette.requests import Request
from starlette.responses import Response

from edge_infer.server.jobs import Job
from edge_infer.server.sse import SSEResponse

Render = Callable[[Job], AsyncIterator[bytes]]


async def generate(srv, request: Request, lease, body, *, stream: Render, whole: Callable[[Job], Response],
                   response_cls: type[SSEResponse] = SSEResponse, plain: bool = False) -> Response:
    """Submit `body` on the leased engine; answer with stream(job) when the body asks for a
    stream, else with whole(job) once every choice has finished."""
    try:
        job = Job(lease.engine, body, plain=plain)
        job.on_finish = lambda ev: ev.stats and srv.metrics.generation(ev.stats, ev.reason)
        job.submit()  # a refusal is raised here, before any response byte
        if body.stream:
            def closed():
                count_if_cancelled(srv, job)
                lease.release()
            return response_cls(stream(job), on_close=closed)
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
