"""The stdio endpoints: this process's stdin/stdout, and the upstream process.

Messages are newline-delimited JSON (MCP's stdio transport). The upstream runs
with this process's environment, which is never recorded; its stderr is ours.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Sequence
from typing import Final

__all__ = ["StdioClient", "UpstreamProcess"]

#: The longest message read (a resource's contents may be large).
LINE_LIMIT: Final = 64 * 1024 * 1024
#: How long the upstream gets to exit after its stdin closes, then after SIGTERM.
EXIT_SECONDS: Final = 2.0


async def _line(reader: asyncio.StreamReader) -> bytes | None:
    """The next non-empty line, without its line end; ``None`` at the end."""
    while True:
        line = await reader.readline()
        if not line:
            return None
        line = line.rstrip(b"\r\n")
        if line.strip():
            return line


class StdioClient:
    """The MCP client on the other end of this process's stdin and stdout."""

    def __init__(self) -> None:
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._lock = asyncio.Lock()

    async def open(self) -> None:
        """Attach to stdin and stdout (in the running loop)."""
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=LINE_LIMIT)
        await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), sys.stdin
        )
        # a duplicate: closing the transport leaves the process's stdout open
        out = os.fdopen(os.dup(sys.stdout.fileno()), "wb", buffering=0)
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, out
        )
        self._reader = reader
        self._writer = asyncio.StreamWriter(transport, protocol, reader, loop)

    async def receive(self) -> bytes | None:
        """The client's next message."""
        assert self._reader is not None
        return await _line(self._reader)

    async def send(self, message: bytes) -> None:
        """Write one message to the client."""
        assert self._writer is not None
        async with self._lock:
            self._writer.write(message + b"\n")
            await self._writer.drain()

    async def close(self) -> None:
        """Stop writing to stdout."""
        if self._writer is not None:
            self._writer.close()


class UpstreamProcess:
    """The upstream MCP server, a process started from ``argv``."""

    def __init__(self, argv: Sequence[str]) -> None:
        self.argv = list(argv)
        self._process: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        """Start the process.

        Raises:
            OSError: the command cannot be run.
        """
        self._process = await asyncio.create_subprocess_exec(
            *self.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=LINE_LIMIT,
        )

    async def receive(self) -> bytes | None:
        """The server's next message."""
        assert self._process is not None
        assert self._process.stdout is not None
        return await _line(self._process.stdout)

    async def send(self, message: bytes) -> None:
        """Write one message to the server."""
        assert self._process is not None
        assert self._process.stdin is not None
        async with self._lock:
            self._process.stdin.write(message + b"\n")
            await self._process.stdin.drain()

    async def stop(self) -> int | None:
        """Close its stdin, then terminate and kill it if it does not exit.

        Returns:
            Its exit code.
        """
        process = self._process
        if process is None:
            return None
        if process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()
        for signal in (None, process.terminate, process.kill):
            if signal is not None:
                with contextlib.suppress(ProcessLookupError):
                    signal()
            try:
                return await asyncio.wait_for(process.wait(), EXIT_SECONDS)
            except TimeoutError:
                continue
        return process.returncode
