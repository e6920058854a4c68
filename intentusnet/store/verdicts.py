"""The verdict on many records: their chains, and their signatures with a key ring.

:class:`Verification` is what ``intentusnet verify`` shows: the records named,
or every record (a store's ``verify_all``), each judged with a ``KeyRing`` when
one is given, and the totals over all of them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, NamedTuple

from ..record.model import VerifyReport
from ..record.signing import SignatureStatus
from .verification import Progress, StoreVerification, verify_each

if TYPE_CHECKING:
    from ..record.signing import KeyRing, SignatureCheck
    from .protocol import ExecutionStore

__all__ = ["Verification", "VerifyOutcome"]


class VerifyOutcome(NamedTuple):
    """One record's verdict (added in 0.1.0)."""

    #: the record's chain, line by line
    report: VerifyReport
    #: the chain holds and, with a key ring, the ring accepts the signatures
    valid: bool
    #: what the signatures show; None without a key ring
    signature: SignatureCheck | None


class Verification:
    """The records named, or every record, verified as this is iterated.

    Iterating yields a :class:`VerifyOutcome` for every record named, or, over
    the whole store, for those that fail or carry notes (every record with
    ``each``). The totals count every record checked so far. With a key ring
    each record's signatures are judged too, and a signature the ring does not
    accept fails its record. Added in 0.1.0.

    Args:
        store: where the records are.
        ids: the records to verify, in this order; None for every record.
            A record named that is not there raises ``RecordNotFound`` when
            it is reached; one gone since the store was listed is passed over.
        ring: the public keys to judge signatures with.
        each: over the whole store, yield every record.
        processes: worker processes for the whole store (see ``verify_all``).
        on_progress: called with the number of records checked so far.
    """

    def __init__(
        self,
        store: ExecutionStore,
        ids: Sequence[str] | None = None,
        *,
        ring: KeyRing | None = None,
        each: bool = False,
        processes: int = 1,
        on_progress: Progress | None = None,
    ) -> None:
        self._ring = ring
        self._each = each or ids is not None
        if ids is not None:
            self._run = StoreVerification(
                verify_each(store.verify, ids, each=True, named=True), on_progress
            )
        else:
            # Every report, when signatures are judged: a valid chain may hide
            # a signature that fails.
            self._run = store.verify_all(
                each=self._each or ring is not None,
                processes=processes,
                on_progress=on_progress,
            )
        #: failures listed, over every record
        self.failures = 0
        #: records by what their signatures show (every status; empty without
        #: a key ring)
        self.signatures: dict[str, int] = (
            {} if ring is None else {status.value: 0 for status in SignatureStatus}
        )
        self._rejected = 0  # sound chains whose signatures the ring refused

    def __iter__(self) -> Iterator[VerifyOutcome]:
        for report in self._run:
            check = None if self._ring is None else self._ring.check_report(report)
            valid = report.valid and (check is None or check.accepted)
            self.failures += len(report.failures)
            if check is not None:
                self.signatures[check.status.value] += 1
                self._rejected += report.valid and not valid
            if self._each or not valid or report.failures or report.notes:
                yield VerifyOutcome(report, valid, check)

    @property
    def records(self) -> int:
        """Records checked."""
        return self._run.records

    @property
    def invalid(self) -> int:
        """Records that fail: their chain, or their signatures."""
        return self._run.invalid + self._rejected

    @property
    def recording_failures(self) -> int:
        """Files with no complete first line (valid, see ``VerifyReport``)."""
        return self._run.recording_failures

    @property
    def events_total(self) -> int:
        """Lines checked, header lines included."""
        return self._run.events_total

    @property
    def events_verified(self) -> int:
        """Lines whose hash and link hold."""
        return self._run.events_verified
