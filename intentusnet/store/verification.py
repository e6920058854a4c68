"""Verifying many records: every record of a store, or those named, with totals.

:class:`StoreVerification` is what a store's ``verify_all`` returns: the hash
chain of every record checked as it is iterated, the reports worth showing
yielded, the totals kept. The file store feeds it a chunk of one shard
directory at a time; a store read one record at a time (memory, PostgreSQL)
feeds it :func:`verify_each`. :class:`Verification` is what ``intentusnet
verify`` shows: the records named, or every record, each judged with a
``KeyRing`` when one is given, and the totals over all of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, NamedTuple, TypeAlias

from ..errors import RecordIntegrityError, RecordNotFound
from ..record.model import VerifyReport
from ..record.signing import SignatureStatus

if TYPE_CHECKING:
    from ..record.signing import KeyRing, SignatureCheck
    from .protocol import ExecutionStore

__all__ = [
    "Progress",
    "StoreVerification",
    "Tally",
    "Verification",
    "VerifyOutcome",
    "tally",
    "unjudged",
    "verify_each",
]

#: Called with the number of records done so far.
Progress: TypeAlias = Callable[[int], None]
#: Some records checked: (records, invalid, recording failures, lines, lines
#: verified, the reports worth showing).
Tally: TypeAlias = tuple[int, int, int, int, int, list[VerifyReport]]


def unjudged(execution_id: str, problem: RecordIntegrityError) -> VerifyReport:
    """The failing report of a record that cannot be checked (a newer format)."""
    return VerifyReport(execution_id, 0, 0, (str(problem),), valid=False)


def tally(reports: Iterable[VerifyReport], each: bool) -> Tally:
    """Add up ``reports``; keep every one with ``each``, else those with remarks.

    A report with failures or notes is worth showing; with ``each``, all are.
    """
    records = invalid = failed = lines = verified = 0
    shown: list[VerifyReport] = []
    for report in reports:
        records += 1
        invalid += not report.valid
        failed += report.recording_failure
        lines += report.events_total
        verified += report.events_verified
        if each or report.failures or report.notes:
            shown.append(report)
    return records, invalid, failed, lines, verified, shown


def verify_each(
    store: ExecutionStore, ids: Iterable[str], *, each: bool, named: bool = False
) -> Iterator[Tally]:
    """Verify the records ``ids`` one at a time, with ``store.verify``; a tally each.

    A record gone since it was listed is passed over, unless it was ``named``
    (then ``RecordNotFound`` is raised when it is reached).
    """
    for execution_id in ids:
        try:
            report = store.verify(execution_id)
        except RecordNotFound:
            if named:
                raise
            continue
        except RecordIntegrityError as exc:
            report = unjudged(execution_id, exc)
        yield tally([report], each)


class StoreVerification:
    """``verify`` of many records, run as it is iterated (see ``verify_all``).

    Iterating yields the reports worth showing; the totals count every record
    checked so far, and are final once iteration ends.
    """

    def __init__(self, tallies: Iterable[Tally], on_progress: Progress | None) -> None:
        self._tallies = tallies
        self._on_progress = on_progress
        #: records checked
        self.records = 0
        #: records with failures
        self.invalid = 0
        #: files with no complete first line (valid, see ``VerifyReport``)
        self.recording_failures = 0
        #: lines checked, header lines included
        self.events_total = 0
        #: lines whose hash and link hold
        self.events_verified = 0

    def __iter__(self) -> Iterator[VerifyReport]:
        for records, invalid, failed, lines, verified, shown in self._tallies:
            self.records += records
            self.invalid += invalid
            self.recording_failures += failed
            self.events_total += lines
            self.events_verified += verified
            if self._on_progress is not None:
                self._on_progress(self.records)
            yield from shown


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
                verify_each(store, ids, each=True, named=True), on_progress
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
