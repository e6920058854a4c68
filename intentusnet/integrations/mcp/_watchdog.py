"""Runs the upstream MCP server so that it dies with the proxy, however the proxy ends.

Run by path, not imported: ``python _watchdog.py FD -- SERVER...``. The proxy
starts this in a process group of its own and keeps the write end of a pipe
whose read end is ``FD``. It starts the server in the same group, with the
proxy's pipes as its stdin and stdout, and waits for either of two things:

- the server exits: so does this, with its exit code;
- the pipe reads end-of-file: the proxy is gone (it exited, crashed or was
  SIGKILLed: the kernel closes a dead process's descriptors), so the whole
  group is killed, the server and anything it started (``npx`` starts a shell
  that starts ``node``).

A parent-death signal (Linux's ``PR_SET_PDEATHSIG``) would reach only the
direct child, and only on Linux; a pipe's end-of-file reaches this process on
any POSIX system, and a group kill reaches the server's own children too.
"""

import os
import signal
import subprocess
import sys
import threading


def main(argv: list[str]) -> int:
    """Start the server, then watch the proxy's pipe; the server's exit code."""
    watched = int(argv[0])
    server = subprocess.Popen(argv[2:])  # stdin, stdout, stderr: the proxy's
    # This process no longer reads or writes the protocol: only the server
    # holds the pipes, so the proxy sees their end when the server exits.
    os.close(0)
    os.close(1)
    # The group's SIGTERM (the proxy stopping it) is for the server: this
    # process ends when the server does.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)

    def watch() -> None:
        os.read(watched, 1)  # b"" once the proxy is gone: it never writes
        os.killpg(0, signal.SIGKILL)

    threading.Thread(target=watch, daemon=True).start()
    code = server.wait()
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
