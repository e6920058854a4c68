"""Repository promises: the README's set-up commands, its CLI block, CI, changelog."""

import ast
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from intentusnet.cli import cli

ROOT = Path(__file__).resolve().parent.parent


def _setup_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    first_section = readme.split("\n## ", 2)[1]
    block = re.search(r"```bash\n(.*?)```", first_section, re.S)
    assert block is not None, "README's first section has no bash block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_readme_opens_with_exactly_two_setup_commands():
    """The README's first section holds exactly two commands: demo, then tests."""
    commands = _setup_commands()
    assert len(commands) == 2
    assert commands[0].endswith("python examples/quickstart.py")
    assert "pytest" in commands[1]


def test_ci_runs_the_readme_test_command():
    """.ci/run runs the README's test command verbatim."""
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert _setup_commands()[1] in ci


def test_changelog_has_an_unreleased_section():
    """CHANGELOG.md keeps an Unreleased section for the next change."""
    assert "## [Unreleased]" in (ROOT / "CHANGELOG.md").read_text()


def _cli_block() -> list[str]:
    """The lines of the README's bash block of ``intentusnet`` commands."""
    blocks = re.findall(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    cli = [block for block in blocks if block.startswith("intentusnet ")]
    assert len(cli) == 1, "the README has no single bash block of intentusnet commands"
    return [line for line in cli[0].splitlines() if line.strip()]


def test_readme_cli_block_runs_right_after_the_quickstart(tmp_path, monkeypatch):
    """After examples/quickstart.py, every line of the README's CLI block exits 0.

    The quickstart runs as the README's first command, in a process of its own;
    the CLI lines run in this one, through click's test runner.
    """
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}
    env.pop("INTENTUSNET_STORE", None)
    quickstart = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert quickstart.returncode == 0, quickstart.stderr
    assert (tmp_path / ".intentusnet" / "records").is_dir()
    lines = _cli_block()
    assert len(lines) >= 4
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("INTENTUSNET_STORE", raising=False)
    monkeypatch.setenv("NO_COLOR", "1")
    for line in lines:
        program, *args = shlex.split(line, comments=True)
        assert program == "intentusnet", line
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, f"{line}\n{result.output}"
        assert result.stdout.strip(), f"{line} printed nothing"


def _tests_without_summary(root: Path) -> list[str]:
    """Each test function under ``root`` without a one-line docstring summary.

    Test functions are those pytest collects: ``test*`` functions at the top of a
    ``test_*.py`` file or in its classes. The summary is the docstring's first line;
    anything more follows a blank line.
    """
    missing = []
    for path in sorted(root.rglob("test_*.py")):
        body = ast.parse(path.read_text(encoding="utf-8")).body
        in_classes = [
            n for node in body if isinstance(node, ast.ClassDef) for n in node.body
        ]
        for node in sorted([*body, *in_classes], key=lambda node: node.lineno):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            lines = (ast.get_docstring(node, clean=False) or "").split("\n")
            summary = lines[0].strip() and (len(lines) == 1 or not lines[1].strip())
            if node.name.startswith("test") and not summary:
                missing.append(f"{path.relative_to(root)}:{node.lineno} {node.name}")
    return missing


def test_every_test_says_what_it_proves():
    """Every test function in tests/ has a docstring opening with a one-line summary."""
    assert _tests_without_summary(ROOT / "tests") == []


def test_docstring_check_finds_tests_without_a_summary(tmp_path):
    """Tests with no docstring, a blank first line or a wrapped summary are named."""
    (tmp_path / "test_a.py").write_text(
        'def test_said():\n    """It works.\n\n    Because.\n    """\n\n'
        "def test_silent():\n    pass\n\n"
        "class TestGroup:\n"
        '    async def test_blank(self):\n        """\n        Late."""\n\n'
        'def test_wrapped():\n    """It works\n    somehow."""\n\n'
        "def helper():\n    pass\n"
    )
    (tmp_path / "helpers.py").write_text("def test_not_collected():\n    pass\n")
    assert _tests_without_summary(tmp_path) == [
        "test_a.py:7 test_silent",
        "test_a.py:11 test_blank",
        "test_a.py:15 test_wrapped",
    ]
