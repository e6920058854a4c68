"""Golden sets: recorded executions kept beside the tests, one test case each.

``intentusnet records export --to DIR`` writes selected records (and the child
records their steps link to) as a small file store; :func:`golden_cases` lists
its records and :func:`check_golden` re-runs one strictly against today's
application, failing with the reason unless it answers as recorded::

    @pytest.mark.parametrize("case", golden_cases("tests/golden"), ids=str)
    def test_golden(case):
        check_golden(case, router)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import orjson

from ..errors import IntentusNetError
from ..routing.router import IntentRouter
from ..store.naming import open_store
from .verdict import RecordVerdict, check_record

__all__ = ["GoldenCase", "check_golden", "golden_cases"]


@dataclass(frozen=True, slots=True)
class GoldenCase:
    """One record of a golden set. Added in 0.1.0.

    Attributes:
        directory: the golden set's store.
        execution_id: the record.
        intent: its intent, ``name@version`` (empty if it cannot be read).
    """

    directory: Path
    execution_id: str
    intent: str

    def __str__(self) -> str:
        """The test id: ``intent/execution id``."""
        return f"{self.intent or '?'}/{self.execution_id}"


def golden_cases(directory: str | os.PathLike[str]) -> list[GoldenCase]:
    """The records of the golden set in ``directory``, oldest first.

    Child records (a ``ctx.route`` child, an HTTP call) are left out: each is
    re-run with the record that made it. A record that cannot be read is kept,
    so that its test fails saying why. Added in 0.1.0.

    Raises:
        FileNotFoundError: ``directory`` does not exist.
    """
    root = Path(directory)
    cases: list[GoldenCase] = []
    with open_store(root, create=False) as store:
        for summary in reversed(store.list()):
            execution_id = summary.execution_id
            intent = f"{summary.intent_name}@{summary.intent_version}"
            try:
                if store.load(execution_id).header.parent_execution_id is not None:
                    continue
            except IntentusNetError:
                pass
            cases.append(GoldenCase(root, execution_id, intent))
    return cases


def check_golden(case: GoldenCase, router: IntentRouter) -> RecordVerdict:
    """Re-run ``case`` strictly with ``router``; fail unless it answers as recorded.

    Added in 0.1.0.

    Returns:
        The verdict (``same``).

    Raises:
        AssertionError: the verdict is ``changed``, ``diverged`` or ``error``;
            the message says where and why, and for ``changed`` shows the
            recorded answer and today's.
    """
    # pytest leaves this frame out of a failure: the test's own line comes
    # first, then the message, not this function's source.
    __tracebackhide__ = True
    with open_store(case.directory, create=False) as store:
        verdict = check_record(store, case.execution_id, router)
    if verdict.outcome not in ("same", "skipped"):
        raise AssertionError(_failure(case, verdict))
    return verdict


def _failure(case: GoldenCase, verdict: RecordVerdict) -> str:
    """What a failed case says: the outcome and why, then the two answers."""
    lines = [f"{case.execution_id} ({case.intent}) {verdict.outcome}: {verdict.reason}"]
    if verdict.outcome == "changed":
        for label, value in (("recorded", verdict.recorded), ("today", verdict.answer)):
            shown = orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
            lines.append(f"{label + ':':9} {shown}")
    return "\n".join(lines)
