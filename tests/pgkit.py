"""A throwaway PostgreSQL server for the tests: real, local, gone at the end.

The server binaries are ``initdb``/``pg_ctl`` on PATH when present, otherwise the
ones the ``pgserver`` package ships (pip-installable PostgreSQL). The server
listens on 127.0.0.1 at a free port and on a Unix socket in its temporary
directory, with a password for TCP, and ``fsync=off`` (the tests kill clients,
not the machine; the benchmarks ask for ``durable=True``, a server's defaults).
PostgreSQL refuses to run as root, so as root it runs as ``nobody``; when
``nobody`` cannot reach the binaries (pgserver installed under ``/root``), the
binaries are copied into the temporary directory first. Every wait is bounded.

The temporary directory is in ``/dev/shm`` (memory) when that has room: each test
creates a database, a copy of the template's files, and on a busy disk that costs
half a second where memory takes a twentieth.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

#: Seconds any server start, stop or command may take.
TIMEOUT = 60
#: Where the server's files go when it has this much room (else the default).
MEMORY_DIR, MEMORY_ROOM = Path("/dev/shm"), 2 << 30
PASSWORD = "s3cret-pw-for-tests"
USER = "postgres"


@dataclass(frozen=True)
class PgServer:
    """A running server: where it listens and how to reach it."""

    host: str
    port: int
    socket_dir: str

    def dsn(self, dbname: str = "postgres") -> str:
        """A TCP URL with the password (as a user would write one)."""
        return f"postgresql://{USER}:{PASSWORD}@{self.host}:{self.port}/{dbname}"

    def socket_dsn(self, dbname: str = "postgres") -> str:
        """A URL over the server's Unix socket (trusted: no password)."""
        return f"postgresql://{USER}@/{dbname}?host={self.socket_dir}&port={self.port}"


def _bin_dir() -> Path:
    found = shutil.which("initdb")
    if found is not None:
        return Path(os.path.realpath(found)).parent
    spec = importlib.util.find_spec("pgserver")  # not imported: it warns on import
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "the PostgreSQL tests need initdb/pg_ctl on PATH or the pgserver "
            "package (pip install -e '.[dev]')"
        )
    return Path(spec.submodule_search_locations[0]) / "pginstall" / "bin"


def _work_dir() -> Path:
    """A new temporary directory, in memory when there is room for the server."""
    parent = None
    if MEMORY_DIR.is_dir() and shutil.disk_usage(MEMORY_DIR).free >= MEMORY_ROOM:
        parent = MEMORY_DIR
    return Path(tempfile.mkdtemp(prefix="intentusnet-pg-", dir=parent))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class _Runner:
    """Runs the server's commands, as ``nobody`` when we are root."""

    def __init__(self, work: Path) -> None:
        self.user: pwd.struct_passwd | None = None
        if os.geteuid() == 0:
            self.user = pwd.getpwnam("nobody")
            os.chown(work, self.user.pw_uid, self.user.pw_gid)
        self.bin = _bin_dir()
        if self.user is not None and not self._reachable():
            # nobody cannot reach them (e.g. under /root): use a copy it can.
            # pgserver's binaries find their libraries at ../../../pgserver.libs
            install = self.bin.parent
            site, copy = install.parent.parent, work / "site"
            for part in (install, site / "pgserver.libs"):
                if part.is_dir():
                    shutil.copytree(part, copy / part.relative_to(site), symlinks=True)
            for path in [copy, *copy.rglob("*")]:
                os.chown(
                    path, self.user.pw_uid, self.user.pw_gid, follow_symlinks=False
                )
            self.bin = copy / install.relative_to(site) / "bin"

    def _reachable(self) -> bool:
        try:
            return self.run("initdb", "--version").returncode == 0
        except PermissionError:
            return False

    def run(self, program: str, *args: str) -> subprocess.CompletedProcess[str]:
        user = self.user
        return subprocess.run(
            [str(self.bin / program), *args],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
            cwd="/",
            user=None if user is None else user.pw_uid,
            group=None if user is None else user.pw_gid,
            extra_groups=None if user is None else [],
        )

    def check(self, program: str, *args: str) -> None:
        done = self.run(program, *args)
        if done.returncode:
            raise RuntimeError(f"{program} failed:\n{done.stdout}\n{done.stderr}")


@contextlib.contextmanager
def postgres_server(*, durable: bool = False) -> Iterator[PgServer]:
    """Start a fresh server in a temporary directory; stop and delete it after.

    ``durable`` keeps the server's defaults (fsync, full page writes) instead of
    turning them off, for measurements.
    """
    work = _work_dir()
    data, sock, pwfile = work / "data", work / "sock", work / "pw"
    started = False
    try:
        runner = _Runner(work)
        sock.mkdir()
        pwfile.write_text(PASSWORD + "\n")
        if runner.user is not None:
            for path in (sock, pwfile):
                os.chown(path, runner.user.pw_uid, runner.user.pw_gid)
        port = _free_port()
        runner.check(
            "initdb",
            "-D",
            str(data),
            "-U",
            USER,
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            f"--pwfile={pwfile}",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        )
        options = (
            f"-c listen_addresses=127.0.0.1 -p {port} -k {sock} -c max_connections=100"
        )
        if not durable:
            options += " -c fsync=off -c full_page_writes=off"
        runner.check(
            "pg_ctl", "-D", str(data), "-l", str(work / "log"), "-w", "-t",
            str(TIMEOUT), "-o", options, "start",
        )  # fmt: skip
        started = True
        yield PgServer("127.0.0.1", port, str(sock))
    finally:
        if started:
            runner.run(
                "pg_ctl", "-D", str(data), "-m", "immediate", "-w", "-t",
                str(TIMEOUT), "stop",
            )  # fmt: skip
        shutil.rmtree(work, ignore_errors=True)
