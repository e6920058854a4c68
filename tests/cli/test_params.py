"""The CLI's parameter helpers: suggesting the names closest to a mistyped one."""

from __future__ import annotations

import difflib
import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st

from intentusnet.cli.params import close_names

from .support import CHECKOUT

_NAME = st.text(alphabet="-abcdelst", max_size=12)


@given(_NAME, st.lists(_NAME, max_size=6))
def test_close_names_are_difflibs(given_name: str, known: list[str]) -> None:
    """Names left out by length alone are ones difflib would not suggest."""
    bare = {name.lstrip("-"): name for name in known}
    expected = difflib.get_close_matches(given_name.lstrip("-"), bare, n=3)
    assert close_names(given_name, known) == [bare[name] for name in expected]


def test_a_long_id_alone_leaves_difflib_unimported() -> None:
    """A long id compared with ``last`` and nothing else imports no difflib."""
    code = (
        "import sys\n"
        "from intentusnet.cli.params import close_names\n"
        "assert close_names('exec-01a2503048417f40add37d514fefe62d', ['last']) == []\n"
        "print('difflib' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": CHECKOUT},
        check=True,
    )
    assert done.stdout.strip() == "False"
