"""The independent implementation the log is checked against: ``aics-tlog``.

It declares Python >= 3.12 but runs on 3.11, so it is not in the ``dev`` extra
(pip would refuse the extra); ``.ci/run`` installs it with
``pip install --ignore-requires-python aics-tlog``. Without it the tests that
need it skip, and fail under ``CI=true``: CI must run them.
"""

from __future__ import annotations

import os
from types import ModuleType

import pytest


def aics_tlog() -> ModuleType:
    """The ``aics_tlog`` module, or fail (CI) or skip (elsewhere)."""
    try:
        import aics_tlog
    except ImportError:
        reason = (
            "aics-tlog is not installed "
            "(pip install --ignore-requires-python aics-tlog)"
        )
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason + "; CI must run these tests", pytrace=False)
        pytest.skip(reason)
    return aics_tlog
