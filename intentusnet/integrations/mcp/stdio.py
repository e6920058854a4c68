"""The stdio endpoints: this process's stdin/stdout, and the upstream process.

Messages are newline-delimited JSON (MCP's stdio transport). The upstream runs
with this process's environment, which is never recorded; its stderr is ours.
It runs under a small watchdog (:mod:`._watchdog`) in a process group of its
own, so that it dies with the proxy however the proxy ends, SIGKILL included.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import shutil
import signal
import sys
from collections.abc import Sequence
from typing import Final

__all__ = ["StdioClient", "UpstreamProcess"]

#: The longest message read (a resource's contents may be large).
LINE_LIMIT: Final = 64 * 1024 * 1024
#: How long the upstream gets to exit after its stdin closes, then after SIGTERM.
EXIT_SECONDS: Final = 2.0
_WATCHDOG: Final = os.path.join(os.path.dirname(__file__), "_watchdog.py")


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
        #: the write end of the watchdog's pipe: closed when this process ends
        self._lifeline: int | None = None

    async def start(self) -> None:
        """Start the process (under the watchdog, in a process group of its own).

        Raises:
            OSError: the command cannot be run.
        """
        if not self.argv or shutil.which(self.argv[0]) is None:
            # the watchdog would only report it on stderr: say it here
            name = self.argv[0] if self.argv else ""
            raise FileNotFoundError(errno.ENOENT, "command not found", name)
        watched, self._lifeline = os.pipe()
        os.set_inheritable(self._lifeline, False)
        try:
            self._process = await asyncio.create_subprocess_exec(
                sys.executable,
                _WATCHDOG,
                str(watched),
                "--",
                *self.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                limit=LINE_LIMIT,
                pass_fds=(watched,),
                start_new_session=True,
            )
        finally:
            os.close(watched)

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
        try:
            for sent in (None, signal.SIGTERM, signal.SIGKILL):
                if sent is not None:  # the group: the server and its children
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(process.pid, sent)
                try:
                    return await asyncio.wait_for(process.wait(), EXIT_SECONDS)
                except TimeoutError:
                    continue
            return process.returncode
        finally:
            if self._lifeline is not None:
                os.close(self._lifeline)
                self._lifeline = None
