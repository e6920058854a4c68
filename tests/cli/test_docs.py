"""docs/cli.md documents every command and option, with examples and exit codes."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from intentusnet.cli import cli
from intentusnet.cli.app import EXIT_CODES

DOC = (Path(__file__).parents[2] / "docs" / "cli.md").read_text()


def _commands(
    group: click.Group, prefix: tuple[str, ...] = ()
) -> Iterator[tuple[str, click.Command]]:
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None
        path = (*prefix, name)
        if isinstance(command, click.Group):
            yield from _commands(command, path)
        else:
            yield " ".join(path), command


COMMANDS = dict(_commands(cli))


def _section(title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", DOC, re.M | re.S)
    assert match is not None, f"docs/cli.md has no section '## {title}'"
    return match.group(1)


def _flags(command: click.Command) -> list[str]:
    return [
        flag
        for param in command.params
        if isinstance(param, click.Option)
        for flag in (*param.opts, *param.secondary_opts)
        if flag.startswith("--") and flag != "--help"
    ]


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_every_command_has_a_section(path: str) -> None:
    """Each command has its section with every option, an example and exit codes."""
    section = _section(f"`intentusnet {path}`")
    for flag in _flags(COMMANDS[path]):
        assert f"`{flag}" in section, f"{path}: option {flag} is not documented"
    for param in COMMANDS[path].params:
        if isinstance(param, click.Argument):
            name = (param.metavar or param.name or "").strip("[].")
            assert name in section, f"{path}: argument {name} is not documented"
    assert "```console" in section, f"{path}: no example"
    assert "Exit codes:" in section, f"{path}: no exit codes"


def test_no_section_for_a_missing_command() -> None:
    """Every documented command exists (docs do not outlive commands)."""
    documented = re.findall(r"^## `intentusnet ([a-z -]+)`$", DOC, re.M)
    assert sorted(documented) == sorted(COMMANDS)


def test_overview_table_links_every_command() -> None:
    """The table at the top names every command."""
    for path in COMMANDS:
        anchor = "#intentusnet-" + path.replace(" ", "-")
        assert f"({anchor})" in DOC, f"{path} is missing from the overview table"


def test_global_options_are_documented() -> None:
    """--store, --debug, --version and --help are described."""
    section = _section("Global options")
    for flag in _flags(cli):
        assert f"`{flag}" in section, f"global option {flag} is not documented"
    assert "`--help`" in section
    assert "INTENTUSNET_STORE" in section


def test_exit_codes_table() -> None:
    """The exit-code table and --help list the same codes, each as --help says it."""
    section = _section("Output, errors and exit codes")
    rows = dict(re.findall(r"^\| (\d+) \| (.*) \|$", section, re.M))
    assert [int(code) for code in rows] == list(EXIT_CODES)
    for code, meaning in EXIT_CODES.items():
        # A row goes on after its meaning with details: after ":", ";" or " (".
        head = re.split(r":|;| \(", rows[str(code)], maxsplit=1)[0]
        assert head == meaning, f"exit code {code}"
    shown = CliRunner().invoke(cli, ["--help"]).output
    for code, meaning in EXIT_CODES.items():
        assert f"\n    {code}  {meaning}\n" in shown


def test_shell_completion_documented() -> None:
    """Completion uses click's own variable for bash, zsh and fish."""
    section = _section("Shell completion")
    for shell in ("bash", "zsh", "fish"):
        assert f"_INTENTUSNET_COMPLETE={shell}_source intentusnet" in section
