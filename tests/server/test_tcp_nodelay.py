"""Every TCP connection the server accepts has Nagle off.

A response's last small segment otherwise waits for the client's delayed ACK: 40 ms added to
each request on a keep-alive connection (the openai client and httpx reuse connections).
asyncio turns Nagle off only on sockets whose proto says TCP, so bind_tcp must say so.
"""

from __future__ import annotations

import asyncio
import socket

from edge_infer.server.launch import bind_tcp


def test_accepted_connections_have_nodelay():
    listener = bind_tcp("127.0.0.1", 0)
    client = socket.create_connection(listener.getsockname()[:2])
    try:
        conn, _ = listener.accept()
        with conn:
            assert conn.proto == socket.IPPROTO_TCP
            assert conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    finally:
        client.close()
        listener.close()


def test_asyncio_transport_of_an_accepted_connection_has_nodelay():
    """What uvicorn gets: asyncio's server on our pre-bound socket."""
    listener = bind_tcp("127.0.0.1", 0)
    seen = []

    async def main():
        async def on_conn(reader, writer):
            sock = writer.get_extra_info("socket")
            seen.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(on_conn, sock=listener)
        async with server:
            _, w = await asyncio.open_connection(*listener.getsockname()[:2])
            for _ in range(100):
                if seen:
                    break
                await asyncio.sleep(0.01)
            w.close()

    asyncio.run(main())
    assert seen and seen[0]
