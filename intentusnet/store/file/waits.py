"""The file store's signals and wake-ups (see ``store.durable.WaitStore``).

Layout under the store's root::

    signals/<2 hex>/<origin id>/<ns>-<uuid7>.json  one signal, written whole
    wakeups/<due minute>/<due µs>.<execution id> an empty file: look at it then

A signal file is written under a hidden name and renamed into place, so a
reader sees it whole or not at all; the names sort by the time (ns) they were
made. A chain keeps at most ``cap`` signals: the sender counts them first (two
senders at once may both pass the count: the cap is approximate by the number
of senders racing).

A wake-up is an empty file whose name says when it is due; its directory is
the minute it falls in (12 digits, so names sort by time). Recovery lists the
minute directories, then only those due, so the cost of a scan follows the
wake-ups due, not the executions waiting. A scan removes a minute directory it
finds empty once that minute is two minutes past (no wake-up is made for it
any more); one made meanwhile is created again.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Final

import orjson

from ..._util.files import FILE_MODE, fsync_dir, make_dirs, write_whole
from ..._util.ids import uuid7_hex
from ..._util.jsonvalue import JSONObject
from ...errors import StoreError
from ..ids import check_id
from .layout import relative_path

SIGNALS_DIR: Final = "signals"
WAKEUPS_DIR: Final = "wakeups"
_MINUTE_US: Final = 60_000_000


def _signals_dir(root: str, origin: str) -> Path:
    return Path(root, SIGNALS_DIR, relative_path(origin)[:2], origin)


def _wakeup_path(root: str, execution_id: str, due_us: int) -> tuple[Path, str]:
    directory = Path(root, WAKEUPS_DIR, f"{max(0, due_us) // _MINUTE_US:012d}")
    return directory, f"{directory}/{max(0, due_us):017d}.{execution_id}"


class FileWaits:
    """The signals and wake-ups of ``FileExecutionStore``, one of its bases.

    The store supplies ``_root`` and ``_fsync`` (see the module's layout).
    """

    _root: str
    _fsync: bool

    def add_signal(self, origin: str, signal: JSONObject, *, cap: int) -> bool:
        """Write ``signal`` for the chain unless it holds ``cap`` signals already."""
        directory = _signals_dir(self._root, check_id(origin))
        try:
            make_dirs(directory)
            kept = [n for n in os.listdir(directory) if not n.startswith(".")]
            if len(kept) >= cap:
                return False
            name = f"{time.time_ns():020d}-{uuid7_hex()}"  # sorts by when it came
            data = orjson.dumps(signal)
            write_whole(directory, f"{directory}/{name}.json", data, self._fsync)
        except OSError as exc:
            raise StoreError(
                f"execution {origin}: cannot keep its signal: {exc}"
            ) from exc
        return True

    def signals(self, origin: str) -> list[JSONObject]:
        """The chain's signals, oldest first.

        Raises:
            StoreError: they could not be read.
        """
        directory = _signals_dir(self._root, check_id(origin))
        try:
            names = sorted(n for n in os.listdir(directory) if n.endswith(".json"))
        except FileNotFoundError:
            return []
        found: list[JSONObject] = []
        try:
            for name in names:
                with open(directory / name, "rb") as handle:
                    signal = orjson.loads(handle.read())
                if isinstance(signal, dict):
                    found.append(signal)
        except (OSError, orjson.JSONDecodeError) as exc:
            raise StoreError(
                f"execution {origin}: cannot read its signals: {exc}"
            ) from exc
        return found

    def add_wakeup(self, execution_id: str, due_us: int) -> None:
        """Create the wake-up's file (nothing if it is there).

        Raises:
            StoreError: it could not be written.
        """
        directory, path = _wakeup_path(self._root, check_id(execution_id), due_us)
        try:
            for last_try in (False, True):
                make_dirs(directory)
                try:
                    fd = os.open(
                        path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, FILE_MODE
                    )
                except FileNotFoundError:
                    if last_try:
                        raise
                    continue  # a scan removed the emptied minute meanwhile
                os.close(fd)
                break
            if self._fsync:
                fsync_dir(str(directory))
        except OSError as exc:
            raise StoreError(
                f"execution {execution_id}: cannot write its wake-up: {exc}"
            ) from exc

    def due_wakeups(self, until_us: int, limit: int) -> list[tuple[str, int]]:
        """The wake-ups due by ``until_us``, soonest first, at most ``limit``."""
        top = Path(self._root, WAKEUPS_DIR)
        last = f"{max(0, until_us) // _MINUTE_US:012d}"
        stale = f"{max(0, until_us) // _MINUTE_US - 2:012d}"
        try:
            minutes = sorted(m for m in os.listdir(top) if m <= last)
        except FileNotFoundError:
            return []
        found: list[tuple[str, int]] = []
        for minute in minutes:
            try:
                names = sorted(os.listdir(top / minute))
            except FileNotFoundError:
                continue
            if not names:
                if minute < stale:  # no wake-up is made for a past minute any more
                    with contextlib.suppress(OSError):
                        os.rmdir(top / minute)
                continue
            for name in names:
                due, _, execution_id = name.partition(".")
                if not due.isdigit() or not execution_id or int(due) > until_us:
                    continue
                found.append((execution_id, int(due)))
                if len(found) >= limit:
                    return found
        return found

    def clear_wakeup(self, execution_id: str, due_us: int) -> None:
        """Delete the wake-up's file (nothing if it is gone).

        Raises:
            StoreError: it could not be deleted.
        """
        path = _wakeup_path(self._root, check_id(execution_id), due_us)[1]
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise StoreError(
                f"execution {execution_id}: cannot delete its wake-up: {exc}"
            ) from exc


def forget_signals(root: str, origin: str) -> None:
    """Delete the chain's signals (its first record is deleted)."""
    directory = _signals_dir(root, origin)
    with contextlib.suppress(FileNotFoundError):
        for name in os.listdir(directory):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(directory / name)
        with contextlib.suppress(OSError):
            os.rmdir(directory)
