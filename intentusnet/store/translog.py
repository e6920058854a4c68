"""The transparency-log half of a store that signs (docs/log.md).

Each backend keeps its log its own way (``file.translog``, ``postgres.translog``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import cached_property
from typing import TYPE_CHECKING

# The log's modules load only for a store that signs (so logs).
if TYPE_CHECKING:
    from ..record.keys import SigningKey
    from ..record.model import ExecutionRecord
    from ..tlog.cadence import LogCadence
    from ..tlog.publish import LogWitnesses
    from ..tlog.sequencer import LogSequencer

__all__ = ["KeepsLog"]


class KeepsLog:
    """Leaves queued, deletions logged: a base of the file and PostgreSQL stores."""

    _signer: SigningKey | None
    #: the log's pace, or None: no log (no key, or turned off)
    _cadence: LogCadence | None
    _witnesses: LogWitnesses | None
    load: Callable[[str], ExecutionRecord]
    #: each backend opens its own
    _open_sequencer: Callable[[SigningKey, LogCadence], LogSequencer]

    def _keep_log(
        self,
        signer: SigningKey | None,
        cadence: LogCadence | None,
        witnesses: LogWitnesses | None,
    ) -> None:
        self._signer = signer
        self._cadence = None if signer is None else cadence
        if self._cadence is not None and witnesses is None:
            from ..tlog.publish import witnesses_from_env

            witnesses = witnesses_from_env()
        self._witnesses = witnesses

    # Threads racing to make the sequencer may both build it, but
    # ``setdefault`` hands every thread the first one stored.
    @cached_property
    def _sequencer(self) -> LogSequencer:
        assert self._signer is not None
        assert self._cadence is not None
        made = self._open_sequencer(self._signer, self._cadence)
        sequencer: LogSequencer = self.__dict__.setdefault("_sequencer", made)
        return sequencer

    def _log_leaf(self, execution_id: str, chain_head: str) -> None:
        """Queue a closed record's leaf for the log (nothing written here)."""
        from ..tlog.leaf import LogLeaf

        assert self._signer is not None
        self._sequencer.queue(LogLeaf(execution_id, chain_head, self._signer.key_id))

    def _log_closed_again(self, execution_id: str) -> None:
        """With a log, queue the leaf of a record closed again (invalidated)."""
        if self._cadence is not None:  # at a new chain head
            self._log_leaf(execution_id, self.load(execution_id).header.chain_head)

    def _log_deletions(self, ids: Iterable[str]) -> None:
        """With a log, log each record's deletion before it is deleted.

        Raises:
            LogError: the log cannot be appended to (nothing is deleted).
        """
        if self._cadence is not None:
            from ..tlog.sequencer import log_deletions

            assert self._signer is not None
            log_deletions(self._sequencer, self.load, ids, self._signer.key_id)
