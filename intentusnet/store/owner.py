"""Which process owns a record, and whether it is still writing it.

A record's header names its owner: pid, host, boot id and the process start time
(clock ticks since boot, from ``/proc``), which together survive pid reuse. The
writer also holds an exclusive ``flock`` on the file until it completes or
closes; the kernel drops it when the process dies, however it dies. An unfinished
record is ``in_progress`` while both say the owner is there, else ``incomplete``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from typing import Final

from .._util.jsonvalue import JSONObject

__all__ = ["current_owner", "opener_alive", "owner_alive"]

_BOOT_ID_PATH: Final = "/proc/sys/kernel/random/boot_id"
_owner_cache: tuple[int, JSONObject] | None = None


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def _start_ticks(pid: int) -> tuple[int | None, bool]:
    """Return (start time in ticks since boot, is a zombie) of ``pid``."""
    stat = _read(f"/proc/{pid}/stat")
    if stat is None:
        return None, False
    # The command name is in parentheses and may itself hold spaces or ")".
    fields = stat[stat.rfind(")") + 2 :].split()
    try:
        return int(fields[19]), fields[0] == "Z"
    except (IndexError, ValueError):
        return None, False


def current_owner() -> JSONObject:
    """Return the owner fields for records this process writes (cached per pid)."""
    global _owner_cache
    if _owner_cache is not None:  # forgotten in a forked child (below)
        return _owner_cache[1]
    pid = os.getpid()
    boot = _read(_BOOT_ID_PATH)
    owner: JSONObject = {
        "pid": pid,
        "host": os.uname().nodename,  # socket.gethostname(), unimported
        "bootId": boot.strip() if boot else None,
        "startTicks": _start_ticks(pid)[0],
    }
    _owner_cache = (pid, owner)
    return owner


def _pid_may_be_owner(owner: JSONObject) -> bool:
    """False when the owner process is known to be gone; True when it may live."""
    mine = current_owner()
    pid = owner.get("pid")
    if type(pid) is not int or owner.get("host") != mine["host"]:
        return True  # another machine: only the lock can tell
    if owner.get("bootId") != mine["bootId"]:
        return False  # the machine rebooted since the record was opened
    if pid == mine["pid"]:
        return owner.get("startTicks") == mine["startTicks"]
    ticks, zombie = _start_ticks(pid)
    if ticks is not None:
        return not zombie and ticks == owner.get("startTicks")
    if os.path.isdir("/proc/self"):
        return False  # /proc works and has no such process
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _locked(path: str) -> bool | None:
    """Whether a writer holds the record's lock; None if that cannot be told."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return None  # no flock here (some network file systems)
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
    return False


def owner_alive(path: str, owner: JSONObject | None) -> bool:
    """Whether the process that opened the record at ``path`` is still writing it."""
    if owner is not None and not _pid_may_be_owner(owner):
        return False
    locked = _locked(path)
    return locked if locked is not None else owner is not None


def opener_alive(path: str, owner: JSONObject | None) -> bool:
    """Whether the process that created the header-less file at ``path`` lives on.

    Such a process is between creating the file and writing its header, and
    may not hold the file's lock yet: its pid decides when the catalog knows
    it, else the lock.
    """
    if owner is not None:
        return _pid_may_be_owner(owner)
    return _locked(path) is True


def _forget_owner() -> None:
    global _owner_cache
    _owner_cache = None


os.register_at_fork(after_in_child=_forget_owner)
