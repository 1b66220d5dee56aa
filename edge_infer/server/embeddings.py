"""OpenAI's /v1/embeddings and llama-server's (Jina's) /v1/rerank over Engine.embed / rerank.

The engine computes in the caller's thread, so each request runs it in a worker thread
(never on the event loop) and holds its model lease until that thread is done, even when
the client has left: the model must not be unloaded under a running llama.cpp call.
"""

from __future__ import annotations

import asyncio
import base64
import math
from typing import Literal, Union

import numpy as np
from pydantic import Field, model_validator
from starlette.requests import Request
from starlette.responses import Response

from edge_infer.server.errors import APIError, SafeJSONResponse, bad_request, from_engine
from edge_infer.server.schemas import Body, parse

MAX_INPUTS = 2048  # OpenAI's bound on the inputs of one embeddings request


class EmbeddingRequest(Body):
    model: str | None = None
    input: Union[str, list[str], list[int], list[list[int]]]
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = Field(None, ge=1)
    keep_alive: str | float | None = None  # as for completions (server.leases)
    # `user` is accepted and ignored, like every field this server has no use for.

    @model_validator(mode="after")
    def _check(self):
        if isinstance(self.input, list):
            if not self.input:
                raise bad_request("input must not be empty", "input")
            if len(self.input) > MAX_INPUTS:
                raise bad_request(f"input has {len(self.input)} items; at most {MAX_INPUTS} per request", "input")
        return self

    def inputs(self) -> list[str | list[int]]:
        """One entry per vector: a text, or token ids."""
        x = self.input
        if isinstance(x, str) or all(isinstance(t, int) for t in x):
            return [x]
        return list(x)


class RerankRequest(Body):
    model: str | None = None
    query: str = Field(min_length=1)
    documents: list[str] = Field(min_length=1, max_length=MAX_INPUTS)
    top_n: int | None = Field(None, ge=1)
    return_documents: bool = False  # Jina's: each result carries {"document": {"text"}}
    keep_alive: str | float | None = None


async def embeddings(srv, request: Request) -> Response:
    srv.authorize(request)
    body = parse(EmbeddingRequest, await srv.read_body(request))

    def checked(engine):
        if body.dimensions is not None and body.dimensions > engine.embedding_size:
            raise bad_request(f"dimensions is {body.dimensions} but this model's vectors have "
                              f"{engine.embedding_size}", "dimensions")

    lease = await srv.lease(request, body.model, body.keep_alive)
    engine = lease.engine
    vectors, n_tokens = await run_leased(
        lease, lambda e: e.embed(body.inputs(), dimensions=body.dimensions), "input", checked)
    data = [{"object": "embedding", "index": i, "embedding": _encode(np.asarray(row, dtype=np.float32),
                                                                      body.encoding_format)}
            for i, row in enumerate(vectors)]
    return SafeJSONResponse({"object": "list", "data": data, "model": engine.name,
                             "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens}})


async def rerank(srv, request: Request) -> Response:
    srv.authorize(request)
    body = parse(RerankRequest, await srv.read_body(request))

    def checked(engine):
        if not engine.can_rerank:
            raise APIError(400, f"{engine.name} cannot rerank: it has no ranking head (a GGUF with pooling "
                                "type rank, such as a bge-reranker or jina-reranker)", param="model",
                           code="model_cannot_rerank")

    lease = await srv.lease(request, body.model, body.keep_alive)
    engine = lease.engine
    scores, n_tokens = await run_leased(lease, lambda e: e.rerank(body.query, body.documents), "documents",
                                        checked)
    order = sorted(range(len(scores)), key=lambda i: -scores[i])[:body.top_n]
    results = []
    for i in order:
        item = {"index": i, "relevance_score": scores[i] if math.isfinite(scores[i]) else None}
        if body.return_documents:
            item["document"] = {"text": body.documents[i]}
        results.append(item)
    return SafeJSONResponse({"object": "list", "model": engine.name, "results": results,
                             "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens}})


async def run_leased(lease, call, param: str, check=None):
    """call(engine) in a worker thread on a leased model (check(engine) first), its refusals
    as OpenAI errors naming `param`. The lease lasts until the thread returns, even when
    the client leaves: a model is never unloaded under a running call."""
    work = None
    try:
        if check is not None:
            check(lease.engine)
        work = asyncio.ensure_future(asyncio.to_thread(call, lease.engine))
        try:
            return await asyncio.shield(work)  # a client that leaves cancels the wait, not the work
        except APIError:
            raise
        except Exception as exc:
            raise from_engine(exc, param=param) from None
    finally:
        _release_after(lease, work)


def _release_after(lease, work: asyncio.Future | None) -> None:
    """Release the lease now, or once the worker thread returns if it is still running."""
    if work is None or work.done():
        lease.release()
        return

    def done(f: asyncio.Future) -> None:
        if not f.cancelled():
            f.exception()  # retrieved: the client is gone, nobody else will read it
        lease.release()
    work.add_done_callback(done)


def _encode(row: np.ndarray, encoding_format: str):
    if encoding_format == "base64":  # what OpenAI's client decodes: little-endian float32 bytes
        return base64.b64encode(row.astype("<f4").tobytes()).decode("ascii")
    return row.tolist()
