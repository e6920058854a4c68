"""``intentusnet log verify --follow``: a real monitor process over a growing store."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from recordkit import finished

from intentusnet.record.keys import SigningKey
from intentusnet.store import FileExecutionStore

from .support import CHECKOUT, record_file

FAST = {"seconds": 0.05, "leaves": 256}


class Monitor:
    """``log verify --follow --json`` on a store, its reports read line by line."""

    def __init__(self, root: Path, public: Path, state: Path) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "intentusnet.cli",
                "--store",
                str(root),
                "log",
                "verify",
                "--key",
                str(public),
                "--state",
                str(state),
                "--grace",
                "0",
                "--json",
                "--follow",
                "--interval",
                "0.05",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={
                **os.environ,
                "PYTHONPATH": os.pathsep.join(
                    [CHECKOUT, os.environ.get("PYTHONPATH", "")]
                ),
            },
        )

    def report(self) -> dict[str, object]:
        """The next report (one JSON line); fails if the process ends first."""
        assert self.process.stdout is not None
        line = self.process.stdout.readline()  # the process's wait is bounded below
        assert line, self.errors()
        report: dict[str, object] = orjson.loads(line)
        return report

    def end(self, number: int | None = None) -> int:
        """Send ``number`` (if any) and wait (bounded); the exit code."""
        if number is not None:
            self.process.send_signal(number)
        try:
            return self.process.wait(timeout=30)
        finally:
            for stream in (self.process.stdout, self.process.stderr):
                assert stream is not None
                stream.close()

    def errors(self) -> str:
        """What it wrote to stderr (after it ended)."""
        self.process.wait(timeout=30)
        assert self.process.stderr is not None
        return self.process.stderr.read().decode(errors="replace")


def grow(root: Path, key: SigningKey, count: int, text: str) -> list[str]:
    """``count`` more records closed by the key's holder; the log holds them."""
    from intentusnet.tlog.cadence import LogCadence

    store = FileExecutionStore(root, signing_key=key, log_cadence=LogCadence(**FAST))
    ids = [finished(store, f"{text} {i}") for i in range(count)]
    store.close()
    return ids


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGINT])
def test_each_new_checkpoint_is_audited_until_a_signal(
    tmp_path: Path, number: int
) -> None:
    """Each checkpoint appended while it runs is reported; SIGTERM, SIGINT: exit 0."""
    key = SigningKey.generate()
    _, public = key.save(tmp_path / "keys")
    root = tmp_path / "store"
    grow(root, key, 3, "first")
    monitor = Monitor(root, public, tmp_path / "state")
    try:
        first = monitor.report()
        assert (first["size"], first["valid"]) == (3, True)
        grow(root, key, 2, "more")
        second = monitor.report()
        assert (second["size"], second["valid"], second["records"]) == (5, True, 5)
    finally:
        code = monitor.end(number)
    assert code == 0
    assert (tmp_path / "state").read_bytes().split(b"\n")[1] == b"5"


def test_a_bad_checkpoint_ends_it_with_the_findings_code(tmp_path: Path) -> None:
    """A record deleted, then a new checkpoint: its report names it, exit 13.

    The log then grows back from an earlier copy: a fresh monitor remembering the
    larger checkpoint reports a rollback at once, exit 15.
    """
    key = SigningKey.generate()
    _, public = key.save(tmp_path / "keys")
    root = tmp_path / "store"
    ids = grow(root, key, 3, "first")
    shutil.copytree(root, tmp_path / "earlier")
    monitor = Monitor(root, public, tmp_path / "state")
    try:
        assert monitor.report()["valid"] is True
        record_file(root, ids[1]).unlink()
        grow(root, key, 1, "after")
        report = monitor.report()
    finally:
        code = monitor.end()
    assert code == 13
    findings = report["findings"]
    assert isinstance(findings, list)
    assert [(f["name"], f["executionId"], f["exitCode"]) for f in findings] == [
        ("deleted", ids[1], 13)
    ]
    shutil.rmtree(root)
    shutil.copytree(tmp_path / "earlier", root)
    monitor = Monitor(root, public, tmp_path / "state")
    report = monitor.report()
    assert monitor.end() == 15
    findings = report["findings"]
    assert isinstance(findings, list)
    assert [f["name"] for f in findings] == ["rollback"]
