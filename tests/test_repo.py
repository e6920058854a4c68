"""Repository promises: the README's two set-up commands, CI running the second."""

import re
from pathlib import Path

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
