"""The JUnit XML report of ``rerun --all``: its shape, read back by a real parser."""

from __future__ import annotations

import tempfile
from pathlib import Path
from xml.etree import ElementTree

from intentusnet import RecordVerdict
from intentusnet.cli.junit import JUnitReport


def test_one_case_per_record_with_the_outcome_element(tmp_path: Path) -> None:
    """Counts first; failure, error and skipped elements; odd characters made safe."""
    path = tmp_path / "report.xml"
    verdicts = [
        RecordVerdict("exec-1", "a@1.0", "same"),
        RecordVerdict("exec-2", "a@1.0", "changed", "answer differs at x"),
        RecordVerdict("exec-3", "a@1.0", "diverged", "asked for 'b' at step 2"),
        RecordVerdict("exec-4", "", "error", "raised ValueError: bad \x00\x1b byte"),
        RecordVerdict("exec-5", "http.request@1.0", "skipped", "a child of exec-1"),
    ]
    with tempfile.TemporaryFile() as body:
        report = JUnitReport(path, "suite <&>", body)
        for verdict in verdicts:
            report.add(verdict)
        report.close()
    root = ElementTree.parse(path).getroot()
    assert root.tag == "testsuites"
    (suite,) = root
    assert suite.attrib == {
        "name": "suite <&>",
        "tests": "5",
        "failures": "2",
        "errors": "1",
        "skipped": "1",
    }
    cases = suite.findall("testcase")
    assert [(c.get("classname"), c.get("name")) for c in cases] == [
        ("a@1.0", "exec-1"),
        ("a@1.0", "exec-2"),
        ("a@1.0", "exec-3"),
        ("unknown", "exec-4"),
        ("http.request@1.0", "exec-5"),
    ]
    assert [[(e.tag, e.get("type")) for e in c] for c in cases] == [
        [],
        [("failure", "changed")],
        [("failure", "diverged")],
        [("error", "error")],
        [("skipped", None)],
    ]
    error = cases[3].find("error")
    assert error is not None
    assert error.get("message") == "raised ValueError: bad ?? byte"
