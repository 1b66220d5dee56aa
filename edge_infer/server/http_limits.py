"""Connection-level bounds uvicorn does not set by itself.

uvicorn waits forever for a request's headers (its keep-alive timer only runs between
requests, and the first byte of a new request cancels it), so a client that sends half a
request line and stops holds a connection for good: slowloris. The protocol below closes a
connection whose request headers are not complete within HEADER_TIMEOUT. Bodies are timed
by the app (Server.read_body answers 408). h11 caps only headers that arrive in pieces, so
HeaderLimit checks whole header blocks in the app (431); the connection count is a uvicorn
setting (launch.uvicorn_server).
"""

from __future__ import annotations

import asyncio

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_TIMEOUT = 10.0          # seconds from connect (or the last response) to complete headers
MAX_HEADER_BYTES = 16 * 1024   # request line + headers; larger is answered 400 by uvicorn
MAX_HEADERS = 100              # header lines per request
MAX_CONNECTIONS = 512          # open connections; beyond, uvicorn answers 503


class HeaderLimit:
    """ASGI middleware: 431 for a request whose headers are too many or too large."""

    def __init__(self, app, max_bytes: int = MAX_HEADER_BYTES, max_count: int = MAX_HEADERS):
        self.app, self.max_bytes, self.max_count = app, max_bytes, max_count

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            headers = scope["headers"]
            size = sum(len(k) + len(v) + 4 for k, v in headers)
            if len(headers) > self.max_count or size > self.max_bytes:
                from edge_infer.server.errors import APIError

                err = APIError(431, f"request headers too large: {len(headers)} headers, {size} bytes "
                                    f"(limits {self.max_count}, {self.max_bytes})",
                               code="headers_too_large", type="invalid_request_error")
                return await err.response()(scope, receive, send)
        return await self.app(scope, receive, send)


class HeaderTimeoutH11Protocol(H11Protocol):
    header_timeout = HEADER_TIMEOUT

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm_header_timer()  # the next request on this keep-alive connection is timed too

    def connection_lost(self, exc: Exception | None) -> None:
        timer = getattr(self, "_header_timer", None)
        if timer is not None:
            timer.cancel()
        super().connection_lost(exc)

    def _arm_header_timer(self) -> None:
        old = getattr(self, "_header_timer", None)
        if old is not None:
            old.cancel()
        self._header_timer = self.loop.call_later(self.header_timeout, self._headers_overdue)

    def _headers_overdue(self) -> None:
        # IDLE: h11 has not yet seen a whole request line and header block.
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()
