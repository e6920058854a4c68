"""Terminal sessions marked ``<!-- executed -->`` in docs/*.md run as shown.

A ```console block right after a line ``<!-- executed -->`` is a session: each
``$ `` line (with its ``\\``-continued lines) is a command for bash, and the
lines after it, up to the next ``$ ``, are what it prints (stdout and stderr
together). The commands of one block run in order in one bash process, in an
empty temporary directory holding a copy of ``examples/``, with the installed
``intentusnet`` script running this checkout, ``INTENTUSNET_STORE`` unset and
the network refused to none but loopback (nothing here needs it).

What is compared, so that the docs can show real output:

- a line ``...`` stands for any number of lines (none included);
- ``...`` inside a line stands for any text;
- execution ids (``exec-`` and 32 hex digits), ``sha256:`` hashes and
  durations (``1.234 ms``) match any other of their kind;
- trailing spaces do not count.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted((ROOT / "docs").glob("*.md"))
MARK = "<!-- executed -->"
_END = "@@intentusnet-doc-session-end@@"
_KINDS = (
    (re.compile(r"exec-[0-9a-f]{32}"), "exec-<id>"),
    (re.compile(r"sha256:[0-9a-f]{6,64}(\.\.\.)?"), "sha256:<hash>"),
    (re.compile(r"\d+(\.\d+)? ms\b"), "<n> ms"),
)


def _sessions() -> Iterator[object]:
    """Every executed console block as a pytest param named ``file:line``."""
    for path in DOCS:
        lines = path.read_text().splitlines()
        for number, line in enumerate(lines):
            if line.strip() != MARK:
                continue
            assert lines[number + 1].strip() == "```console", (
                f"{path.name}:{number + 1}: {MARK} must come right before ```console"
            )
            end = lines.index("```", number + 2)
            name = f"{path.relative_to(ROOT)}:{number + 2}"
            yield pytest.param(lines[number + 2 : end], id=name)


SESSIONS = list(_sessions())


def _commands(block: list[str]) -> list[tuple[str, list[str]]]:
    """The block's commands, each with the lines it is documented to print."""
    found: list[tuple[str, list[str]]] = []
    pending: list[str] = []
    for line in block:
        if line.startswith("$ ") and not (pending and pending[-1].endswith("\\")):
            found.append((line[2:], []))
            pending = [line]
        elif pending and pending[-1].endswith("\\"):
            command, _ = found[-1]
            found[-1] = (command + "\n" + line, [])
            pending.append(line)
        else:
            assert found, f"output before the first command: {line!r}"
            found[-1][1].append(line)
            pending = []
    return found


def _normal(text: str) -> str:
    for pattern, kind in _KINDS:
        text = pattern.sub(kind, text)
    return text.rstrip()


def _line_matches(expected: str, actual: str) -> bool:
    parts = [re.escape(part) for part in _normal(expected).split("...")]
    return re.fullmatch(".*".join(parts), _normal(actual)) is not None


def _matches(expected: list[str], actual: list[str]) -> bool:
    """Whether ``actual`` lines are what ``expected`` shows (``...`` lines: any)."""
    if not expected:
        return not actual
    head, rest = expected[0], expected[1:]
    if head.strip() == "...":
        return any(_matches(rest, actual[skip:]) for skip in range(len(actual) + 1))
    if not actual or not _line_matches(head, actual[0]):
        return False
    return _matches(rest, actual[1:])


def _script() -> Path:
    path = Path(sysconfig.get_path("scripts")) / "intentusnet"
    assert path.exists(), "run `pip install -e '.[dev]'` to install the script"
    return path


def test_sessions_are_found() -> None:
    """docs/debugging.md holds the executed CRM session (the loop, end to end)."""
    names = [param.id for param in SESSIONS]  # type: ignore[attr-defined]
    assert any(name.startswith("docs/debugging.md:") for name in names)


@pytest.mark.parametrize(
    ("expected", "actual", "same"),
    [
        (["a", "...", "c"], ["a", "b", "b", "c"], True),
        (["a", "...", "c"], ["a", "c"], True),
        (["a ... c"], ["a long c"], True),
        (["x exec-01a2026f43527099806226ea2ed30d19"], ["x exec-" + "f" * 32], True),
        (["took 0.020 ms"], ["took 12.5 ms"], True),
        (["a", "b"], ["a"], False),
        (["a"], ["a", "b"], False),
        (["a.b"], ["axb"], False),
    ],
)
def test_the_matcher(expected: list[str], actual: list[str], same: bool) -> None:
    """`...` lines and `...` in a line are wildcards; ids, hashes, durations vary."""
    assert _matches(expected, actual) is same


@pytest.mark.slow  # a shell runs each session's commands, the CLI starting each time
@pytest.mark.parametrize("block", SESSIONS)
def test_session_runs_as_documented(block: list[str], tmp_path: Path) -> None:
    """Each command of the session prints what the docs show."""
    commands = _commands(block)
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    script = "\n".join(
        f"{{ {command}\n}} 2>&1\n__rc=$?; echo; echo '{_END}'; (exit $__rc)"
        for command, _ in commands
    )
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("INTENTUSNET_", "CRM_"))
    }
    env["PATH"] = os.pathsep.join([str(_script().parent), env.get("PATH", "")])
    env["PYTHONPATH"] = str(ROOT)
    env["NO_COLOR"] = "1"
    done = subprocess.run(
        ["bash", "--noprofile", "--norc"],
        input=script,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    outputs = done.stdout.split(_END + "\n")
    for index, (command, expected) in enumerate(commands):
        assert index < len(outputs), f"the session stopped before: $ {command}"
        # the session's own ``echo`` ended the output with a newline
        actual = outputs[index].removesuffix("\n").splitlines()
        if not _matches(expected, actual):
            shown = "\n".join(actual)
            want = "\n".join(expected)
            pytest.fail(
                f"$ {command}\nprinted:\n{shown}\n\nthe docs say:\n{want}\n"
                f"(stderr: {done.stderr[-2000:]})",
                pytrace=False,
            )
