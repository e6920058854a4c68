"""``cli/listening``: the sockets the gateway, MCP, witness and explorer listen on."""

from __future__ import annotations

import asyncio
import socket

from intentusnet.cli.listening import listening_socket


def test_accepted_connections_send_without_waiting_for_acks() -> None:
    """A connection asyncio accepts on the socket has TCP_NODELAY set."""

    async def accepted_nodelay() -> int:
        listening = listening_socket("127.0.0.1", 0, "")
        seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        def connected(
            reader: asyncio.StreamReader, writer: asyncio.StreamWriter
        ) -> None:
            sock = writer.get_extra_info("socket")
            seen.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(connected, sock=listening)
        async with server:
            port = listening.getsockname()[1]
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            try:
                return await asyncio.wait_for(seen, 5)
            finally:
                writer.close()

    assert asyncio.run(accepted_nodelay()) != 0
