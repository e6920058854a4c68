"""The golden set of docs/regression.md: one test per exported record.

Run from examples/, once ``intentusnet records export --to golden`` wrote it::

    python -m pytest -q test_support_triage_golden.py
"""

from pathlib import Path

import pytest
from support_triage import router

from intentusnet.testing import check_golden, golden_cases

GOLDEN = Path(__file__).parent / "golden"


@pytest.mark.parametrize("case", golden_cases(GOLDEN), ids=str)
def test_golden(case):
    check_golden(case, router)
