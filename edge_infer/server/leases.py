"""A request's model, as the host serves it: a lease on the engine for the request's life,
loading the model on demand in a worker thread (never on the event loop), and the host's
refusals as OpenAI-shaped errors."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from edge_infer.errors import EdgeInferError, WorkerError
from edge_infer.host import (HostBusyError, KeepAliveError, Lease, ModelDoesNotFitError, ModelHost,
                             ModelNotLoadedError, parse_keep_alive)
from edge_infer.server.errors import APIError

LOAD_TIMEOUT = 300.0  # seconds a request waits for its model to load or for room


def keep_alive_of(value, param: str = "keep_alive") -> float | None:
    """A request's keep_alive in seconds (None: the model's or the server's default)."""
    if value is None:
        return None
    try:
        return parse_keep_alive(value)
    except KeepAliveError as exc:
        raise APIError(400, str(exc), param=param, code="invalid_keep_alive") from None


def host_error(exc: Exception) -> APIError:
    if isinstance(exc, ModelNotLoadedError):
        return APIError(404, str(exc), param="model", code="model_not_found")
    if isinstance(exc, ModelDoesNotFitError):
        return APIError(400, str(exc), param="model", code="model_does_not_fit")
    if isinstance(exc, WorkerError):  # a worker of the model is down: it may come back
        return APIError(503, f"the model could not be loaded: {exc}", param="model", code="worker_unavailable",
                        headers={"Retry-After": "5"})
    if isinstance(exc, HostBusyError):
        return APIError(503, str(exc), code="model_busy", headers={"Retry-After": "2"})
    # Ours (ModelFileError: deleted or damaged since it was installed) name the model; others are bugs.
    param = "model" if isinstance(exc, EdgeInferError) else None
    return APIError(500, f"the model could not be loaded: {exc}", param=param, code="model_load_failed")


class Leases:
    """Hands out leases from a host to request handlers."""

    def __init__(self, host: ModelHost, load_timeout: float = LOAD_TIMEOUT):
        self.host, self.load_timeout = host, load_timeout
        # Waiting for a load blocks a thread; the host bounds how many wait, so does this pool.
        self._pool = ThreadPoolExecutor(max_workers=max(4, host.max_waiting + 2),
                                        thread_name_prefix="edge-infer-load")

    async def acquire(self, model: str | None, keep_alive: float | None = None) -> Lease:
        try:
            lease = self.host.try_acquire(model, keep_alive)
        except Exception as exc:
            raise host_error(exc) from None
        if lease is not None:
            return lease
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._pool, self.host.acquire, model, keep_alive, self.load_timeout)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:  # the client left while its model loaded: let go of it later
            future.add_done_callback(lambda f: f.cancelled() or f.exception() or f.result().release())
            raise
        except APIError:
            raise
        except Exception as exc:
            raise host_error(exc) from None

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
