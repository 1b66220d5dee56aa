"""Server-sent events: a response that notices a client leaving even while nothing is being
written (a queued request writes nothing). What goes in it: a face's Renderer, driven by
server.generation.stream."""

from __future__ import annotations

import anyio
from starlette.responses import StreamingResponse


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
