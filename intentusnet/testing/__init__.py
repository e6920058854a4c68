"""Production records as regression tests: bulk re-runs and golden sets.

:func:`rerun_all` re-runs many records strictly against today's code in worker
processes (``intentusnet rerun --all``); :func:`golden_cases` and
:func:`check_golden` turn an exported golden set into one pytest case per
record. See docs/regression.md. Added in 0.1.0.
"""

from __future__ import annotations

from .bulk import rerun_all as rerun_all
from .bulk import select_ids as select_ids
from .golden import GoldenCase as GoldenCase
from .golden import check_golden as check_golden
from .golden import golden_cases as golden_cases
from .verdict import OUTCOMES as OUTCOMES
from .verdict import RecordVerdict as RecordVerdict
from .verdict import check_record as check_record

__all__ = [
    "OUTCOMES",
    "GoldenCase",
    "RecordVerdict",
    "check_golden",
    "check_record",
    "golden_cases",
    "rerun_all",
    "select_ids",
]
