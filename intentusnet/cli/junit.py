"""``rerun --all --junit FILE``: one JUnit test case per record re-run.

CI systems (GitHub Actions, GitLab, Jenkins) read the common JUnit XML shape:
``<testsuites>`` holding one ``<testsuite>`` whose counts come first, then one
``<testcase>`` per record: a ``<failure>`` for ``changed`` and ``diverged``,
an ``<error>`` for ``error`` (the new code raised, or the record cannot be
re-run), ``<skipped>`` for a child record. Cases are written to a temporary
file as they come, so memory stays flat; the counts are known, and the file
is put together, at the end.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import IO, Final
from xml.etree import ElementTree

from ..testing.verdict import RecordVerdict

__all__ = ["JUnitReport"]

#: Characters XML 1.0 cannot hold, even escaped.
_NOT_XML: Final = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
#: The element each outcome's test case holds, if any.
_ELEMENT: Final = {"changed": "failure", "diverged": "failure", "error": "error"}


def _text(value: str) -> str:
    return _NOT_XML.sub("?", value)


class JUnitReport:
    """A JUnit XML report built one record at a time.

    Args:
        path: the file written by :meth:`close`.
        name: the test suite's name.
        body: a temporary file holding the test cases until then.
    """

    def __init__(self, path: Path, name: str, body: IO[bytes]) -> None:
        self.path = path
        self.name = name
        self.counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        self._body = body

    def add(self, verdict: RecordVerdict) -> None:
        """Write the test case of one record."""
        case = ElementTree.Element(
            "testcase",
            {
                "classname": _text(verdict.intent or "unknown"),
                "name": _text(verdict.execution_id),
            },
        )
        self.counts["tests"] += 1
        tag = _ELEMENT.get(verdict.outcome)
        if tag is not None:
            self.counts["failures" if tag == "failure" else "errors"] += 1
            detail = ElementTree.SubElement(
                case,
                tag,
                {"type": verdict.outcome, "message": _text(verdict.reason)},
            )
            detail.text = _text(verdict.reason)
        elif verdict.outcome == "skipped":
            self.counts["skipped"] += 1
            ElementTree.SubElement(case, "skipped", {"message": _text(verdict.reason)})
        self._body.write(ElementTree.tostring(case, encoding="utf-8") + b"\n")

    def close(self) -> None:
        """Write the file: the counts, then every test case."""
        counts = {key: str(value) for key, value in self.counts.items()}
        with self.path.open("wb") as out:
            out.write(b'<?xml version="1.0" encoding="utf-8"?>\n')
            out.write(_opening("testsuites", {"name": self.name}))
            out.write(_opening("testsuite", {"name": self.name, **counts}))
            self._body.seek(0)
            shutil.copyfileobj(self._body, out)
            out.write(b"</testsuite>\n</testsuites>\n")


def _opening(tag: str, attributes: dict[str, str]) -> bytes:
    """``<tag a="v">`` and a new line, the values escaped."""
    empty = ElementTree.tostring(ElementTree.Element(tag, attributes), "unicode")
    return (empty.removesuffix(" />") + ">\n").encode()
