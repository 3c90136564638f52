"""The socket `tidings serve` and `tidings api` listen on: answers on a keep-alive connection
go out at once, not after the client's delayed ACK (Nagle's algorithm off)."""

from __future__ import annotations

import asyncio
import socket

from tidings.cli.context import bind_port


async def test_accepted_connections_have_nagle_off() -> None:
    """asyncio turns TCP_NODELAY on only for sockets that name IPPROTO_TCP; a listener made
    without it left every answer after the first on a connection waiting about 40 ms."""
    listener = bind_port("127.0.0.1", 0, setting="http.port")
    listener.listen(8)
    accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def on_connection(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        accepted.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()

    server = await asyncio.start_server(on_connection, sock=listener)
    async with server:
        port = listener.getsockname()[1]
        _reader, writer = await asyncio.open_connection("127.0.0.1", port)
        nodelay = await asyncio.wait_for(accepted, 10)
        writer.close()
    assert nodelay != 0
