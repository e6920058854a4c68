"""The command group: global options, the store it opens, exit-code mapping."""

from __future__ import annotations

from pathlib import Path

import click
import orjson
import pytest

import intentusnet
from intentusnet import errors
from intentusnet.cli import cli
from intentusnet.cli.app import EXIT_CODES
from intentusnet.cli.params import Choice
from intentusnet.store import DEFAULT_ROOT, FileExecutionStore

from .support import Invoke

COMMANDS = {
    "records",
    "inspect",
    "replay",
    "verify",
    "copy",
    "invalidate",
    "keys",
    "log",
    "reindex",
    "prune",
    "stats",
    "run",
    "serve",
    "gateway",
    "rerun",
    "fork",
    "reask",
    "diff",
    "debug",
    "mcp",
    "ui",
    "witness",
    "resume",
    "recover",
    "resolve",
    "cancel",
    "signal",
}


def test_help_lists_every_command(invoke: Invoke) -> None:
    """--help names every command and the exit codes."""
    result = invoke("--help")
    assert result.exit_code == 0
    listed = {
        line.split()[0]
        for line in result.stdout.split("Commands:")[1].splitlines()
        if line.strip()
    }
    assert listed == COMMANDS
    assert "5  envelope hash mismatch" in result.stdout
    assert f"[default: {DEFAULT_ROOT}]" in result.stdout


def test_version(invoke: Invoke) -> None:
    """--version prints the package version."""
    result = invoke("--version")
    assert result.exit_code == 0
    assert result.stdout == f"intentusnet {intentusnet.__version__}\n"


def test_unknown_command_is_usage_error(invoke: Invoke) -> None:
    """click's own usage errors exit 2."""
    assert invoke("frobnicate").exit_code == 2
    assert invoke("records", "list", "--bogus").exit_code == 2


def test_missing_store_exits_2(invoke: Invoke, tmp_path: Path) -> None:
    """A store that does not exist is one line, exit 2, and is not created."""
    missing = tmp_path / "nowhere"
    for args in (["records", "list"], ["replay", "exec-1"], ["verify", "--all"]):
        result = invoke("--store", str(missing), *args)
        assert result.exit_code == 2, args
        assert result.stderr == (
            f"Error: no execution store at '{missing}' "
            "(give --store PATH or set INTENTUSNET_STORE)\n"
        )
    assert not missing.exists()


def test_store_path_that_is_a_file_exits_2(invoke: Invoke, tmp_path: Path) -> None:
    """A store path naming a file is one line, exit 2."""
    file = tmp_path / "file.txt"
    file.write_text("not a store")
    result = invoke("--store", str(file), "stats")
    assert result.exit_code == 2
    assert result.stderr == f"Error: store path '{file}' is not a directory\n"


def test_store_from_environment(
    invoke: Invoke, store_root: Path, ids: dict[str, str]
) -> None:
    """INTENTUSNET_STORE names the store; --store wins over it."""
    result = invoke("stats", "--json", INTENTUSNET_STORE=str(store_root))
    assert result.exit_code == 0, result.output
    assert orjson.loads(result.stdout)["records"] == len(ids)
    other = store_root.parent / "other"
    other.mkdir()
    result = invoke(
        "--store", str(other), "stats", "--json", INTENTUSNET_STORE=str(store_root)
    )
    assert orjson.loads(result.stdout)["records"] == 0


def test_default_store_is_relative(
    invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --store or the variable, .intentusnet/records is used."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("INTENTUSNET_STORE", raising=False)
    result = invoke("stats")
    assert result.exit_code == 2
    assert "'.intentusnet/records'" in result.stderr
    (tmp_path / ".intentusnet" / "records").mkdir(parents=True)
    assert invoke("stats").exit_code == 0


@pytest.mark.parametrize(
    "error",
    [
        errors.StoreError("disk on fire"),
        errors.InvalidExecutionId("bad id"),
        errors.RecordNotFound("no such record"),
        errors.RecordIntegrityError("chain broken", "exec-1", line=3),
        errors.UnsupportedSchemaVersion("from the future"),
        errors.ReplayError("cannot replay"),
        errors.EnvelopeValidationError("bad", "payload.x"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_library_errors_map_to_their_exit_code(
    invoke: Invoke,
    store_root: Path,
    monkeypatch: pytest.MonkeyPatch,
    error: errors.IntentusNetError,
) -> None:
    """Each IntentusNetError exits with its own exit_code and one line."""

    def fail(self: FileExecutionStore) -> None:
        raise error

    monkeypatch.setattr(FileExecutionStore, "stats", fail)
    result = invoke("--store", str(store_root), "stats")
    assert result.exit_code == type(error).exit_code
    assert result.stderr == f"Error: {error}\n"


def test_internal_error_exits_1_and_debug_shows_traceback(
    invoke: Invoke, store_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unexpected exception: one line and exit 1; --debug adds the traceback."""

    def fail(self: FileExecutionStore) -> None:
        raise RuntimeError("unexpected\nsecond line")

    monkeypatch.setattr(FileExecutionStore, "stats", fail)
    result = invoke("--store", str(store_root), "stats")
    assert result.exit_code == 1
    assert result.stderr == (
        "Error: internal error: RuntimeError: unexpected second line "
        "(rerun with --debug for the traceback)\n"
    )
    result = invoke("--debug", "--store", str(store_root), "stats")
    assert result.exit_code == 1
    assert result.stderr.startswith("Traceback (most recent call last)")
    assert 'raise RuntimeError("unexpected\\nsecond line")' in result.stderr
    assert result.stderr.endswith(
        "Error: internal error: RuntimeError: unexpected second line\n"
    )


def test_debug_shows_traceback_of_user_mistakes(
    invoke: Invoke, store_root: Path
) -> None:
    """--debug also shows where a library error was raised; the exit code stays."""
    result = invoke("--debug", "--store", str(store_root), "replay", "../x")
    assert result.exit_code == 3
    assert "Traceback (most recent call last)" in result.stderr
    assert "InvalidExecutionId" in result.stderr


def test_colour_on_a_terminal_only(
    invoke: Invoke, store_root: Path, ids: dict[str, str]
) -> None:
    """Piped output has no colour, a terminal has it, and NO_COLOR turns it off."""
    args = ("--store", str(store_root), "verify", ids["completed"])
    assert "\x1b[" not in invoke(*args).stdout
    assert "\x1b[32mVALID\x1b[0m" in invoke(*args, color=True).stdout
    assert "\x1b[" not in invoke(*args, color=True, NO_COLOR="1").stdout


def test_a_mistyped_command_gets_a_suggestion(invoke: Invoke) -> None:
    """A close match is suggested for a mistyped command; a far one gets none."""
    result = invoke("recrods")
    assert result.exit_code == 2
    assert "Error: No such command 'recrods'. Did you mean 'records'?" in result.stderr
    result = invoke("verfy", "--all")
    assert result.exit_code == 2
    assert "Did you mean 'verify'?" in result.stderr
    result = invoke("xyzzy")
    assert result.exit_code == 2
    assert "Error: No such command 'xyzzy'.\n" in result.stderr
    assert "Did you mean" not in result.stderr


def test_every_error_exits_with_a_documented_code() -> None:
    """Each library error's exit code is one the exit-code table explains."""
    pending: list[type[errors.IntentusNetError]] = [errors.IntentusNetError]
    seen = 0
    while pending:
        error = pending.pop()
        seen += 1
        assert error.exit_code in EXIT_CODES, error.__name__
        pending.extend(error.__subclasses__())
    assert seen > 30  # the whole tree was walked


@pytest.mark.parametrize(
    ("argv", "suggested"),
    [
        (["records", "list", "--stauts", "completed"], "Did you mean '--status'?"),
        (["records", "list", "--jsno"], "Did you mean '--json'?"),
        (["records", "list", "--hlep"], "Did you mean '--help'?"),
        (["--stroe", "x", "records", "list"], "Did you mean '--store'?"),
        (["replay", "x", "--frce"], "Did you mean '--force'?"),
        (["records", "list", "--sort", "newest"], None),
        (["records", "list", "--srot", "newest"], None),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else "",
)
def test_a_mistyped_option_gets_a_close_suggestion(
    invoke: Invoke, argv: list[str], suggested: str | None
) -> None:
    """Options are suggested by their names, not by the "--" they all share."""
    result = invoke(*argv)
    assert result.exit_code == 2
    mistyped = next(arg for arg in argv if arg.startswith("--"))
    assert f"Error: No such option {mistyped!r}." in result.stderr
    if suggested is None:  # --json was suggested for --sort: "--" counted
        assert "Did you mean" not in result.stderr
        assert "--json" not in result.stderr
    else:
        assert suggested in result.stderr


def test_a_mistyped_choice_gets_the_closest_suggested(invoke: Invoke) -> None:
    """A value outside an option's choices lists them and suggests the close ones."""
    result = invoke("records", "list", "--status", "complted")
    assert result.exit_code == 2
    assert "'complted' is not one of 'completed', 'failed'," in result.stderr
    assert "Did you mean one of 'completed', 'incomplete'?" in result.stderr
    result = invoke("records", "list", "--status", "zzz")
    assert result.exit_code == 2
    assert "'zzz' is not one of" in result.stderr
    assert "Did you mean" not in result.stderr


def _every_command(group: click.Group) -> list[click.Command]:
    ctx = click.Context(group)
    found: list[click.Command] = [group]
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None
        found += (
            _every_command(command) if isinstance(command, click.Group) else [command]
        )
    return found


def test_every_choice_option_suggests() -> None:
    """Every option with choices, in every command, is one that suggests."""
    choices = [
        param
        for command in _every_command(cli)
        for param in command.params
        if isinstance(param.type, click.Choice)
    ]
    assert len(choices) >= 8  # --status, --mode, --log-level, --pace, --allow ...
    for param in choices:
        assert isinstance(param.type, Choice), param.name
