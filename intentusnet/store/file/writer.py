"""The file store's record writer: lines appended to one file it holds locked."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Final

from ..._util.jsonvalue import JSONObject
from ...errors import StoreError
from ...record.keys import SigningKey
from ...record.model import ReplayableReason
from ..rows import CatalogRow
from ..step_index import StepKey, indexed
from ..usage import usage_text
from ..writer import ChainWriter

__all__ = ["FileRecordWriter"]

_EXECUTION_INCOMPLETE: Final = ReplayableReason.EXECUTION_INCOMPLETE.value


class FileRecordWriter(ChainWriter):
    """Writes one record file: one ``os.write`` per line, ``flock`` held while open.

    Made by ``FileExecutionStore.open``.
    """

    def __init__(
        self,
        execution_id: str,
        *,
        fd: int,
        header_hash: str,
        size: int,
        fsync: bool,
        row: CatalogRow,
        on_complete: Callable[[CatalogRow, list[StepKey]], None],
        signer: SigningKey | None = None,
    ) -> None:
        super().__init__(execution_id, header_hash, size, signer)
        self._fd = fd
        self._fsync = fsync
        self._row = row
        self._on_complete = on_complete
        self.index_steps = indexed(row.intent)

    def _emit(self, line: bytes) -> None:
        fd = self._fd
        try:
            written = os.write(fd, line)
            while written < len(line):  # only on a full disk or a signal
                more = os.write(fd, line[written:])
                if more == 0:
                    raise OSError(28, "no space left on device")
                written += more
        except OSError as exc:
            try:
                os.ftruncate(fd, self._size)  # drop the partial line
            except OSError:
                self._broken = True
            raise StoreError(
                f"record {self.execution_id}: write failed: {exc.strerror or exc}"
            ) from exc

    def _finish(self, *, completed: bool) -> None:
        fd, self._fd = self._fd, -1
        try:
            if completed and self._fsync:
                os.fsync(fd)
        except OSError as exc:
            raise StoreError(
                f"record {self.execution_id}: fsync failed: {exc.strerror or exc}"
            ) from exc
        finally:
            with contextlib.suppress(OSError):
                os.close(fd)  # also releases the flock

    def _completed(self, response: JSONObject) -> None:
        row = self._row  # as opened, with what completing changed
        self._on_complete(
            CatalogRow(
                *row[:6],
                *self._outcome(response),
                row.parent_id,
                row.owner,
                self._seq + 1,
                self._size,
                self._prev,
                usage_text(response),
                row.inode,
            ),
            self.ended_steps,
        )

    def _closed(self) -> None:
        # Stopped unfinished by its own process: incomplete from now on, and
        # the row says so (readers need not find out; only a killed process's
        # row is left "in_progress" for them to settle).
        seq, head = self._written
        row = self._row._replace(  # as opened: no agent, duration or usage
            status=self._unfinished(),
            replayable=0,
            reason=self._reason() or _EXECUTION_INCOMPLETE,
            lines=seq + 1,
            size=self._size,
            chain_head=head,
        )
        self._on_complete(row, self.ended_steps)

    def __del__(self) -> None:
        # A writer dropped without close() must not keep its lock for the life
        # of the process (the record would look in progress).
        fd = getattr(self, "_fd", -1)
        if fd >= 0:
            with contextlib.suppress(OSError):
                if self._held:  # sealed lines still waiting: keep them
                    os.write(fd, b"".join(self._held))
            with contextlib.suppress(OSError):
                os.close(fd)
