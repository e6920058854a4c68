"""Verifying many records' hash chains, with totals: what ``verify_all`` returns.

:class:`StoreVerification` checks records as it is iterated, yields the reports
worth showing and keeps the totals. The file store feeds it a chunk of one
shard directory at a time; a store read one record at a time (memory,
PostgreSQL) feeds it :func:`verify_each`. ``verdicts`` judges the outcome,
signatures included, for ``intentusnet verify``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TypeAlias

from ..errors import RecordIntegrityError, RecordNotFound
from ..record.model import VerifyReport

__all__ = [
    "Progress",
    "StoreVerification",
    "Tally",
    "VerifiesEach",
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
    verify: Callable[[str], VerifyReport],
    ids: Iterable[str],
    *,
    each: bool,
    named: bool = False,
) -> Iterator[Tally]:
    """Verify the records ``ids`` one at a time, with a store's ``verify``.

    A tally each (see :func:`tally`).
    A record gone since it was listed is passed over, unless it was ``named``
    (then ``RecordNotFound`` is raised when it is reached).
    """
    for execution_id in ids:
        try:
            report = verify(execution_id)
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


class VerifiesEach:
    """``verify_all`` one record at a time: the memory and PostgreSQL stores'."""

    verify: Callable[[str], VerifyReport]
    iter_ids: Callable[[], Iterator[str]]

    def verify_all(
        self,
        *,
        each: bool = False,
        processes: int = 1,
        on_progress: Progress | None = None,
    ) -> StoreVerification:
        """Verify every record, one at a time (see ``ExecutionStore.verify_all``).

        ``processes`` is not used: each record is read in this process.
        """
        return StoreVerification(
            verify_each(self.verify, self.iter_ids(), each=each), on_progress
        )
