"""The ``intentusnet`` command group: global options and the exit-code mapping.

Every ``IntentusNetError`` a command lets through becomes one ``Error:`` line on
stderr and exits with that error's ``exit_code`` (DESIGN §8); anything else is
an internal error (exit 1). ``--debug`` prints the traceback as well.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any, Final

import click

from .. import __version__
from ..errors import IntentusNetError
from .context import Settings
from .output import colour
from .params import CliFailure, close_names, did_you_mean

_HELP_OPTIONS = {"help_option_names": ["-h", "--help"], "max_content_width": 88}

#: What each exit code means, as ``--help`` says it; each is how the row of
#: docs/cli.md's exit-code table begins (tests/cli/test_docs.py holds them equal),
#: and every library error's ``exit_code`` is one of them.
EXIT_CODES: Final[Mapping[int, str]] = {
    0: "success",
    1: "unexpected internal error, or a store that cannot be read or written",
    2: "usage error",
    3: "record not found, or an invalid id",
    4: (
        "record not replayable, or an execution that cannot be resumed, "
        "resolved or cancelled"
    ),
    5: "envelope hash mismatch",
    6: "integrity or signature failure",
    7: "cassette miss",
    8: "the execution ran, and failed",
}
# \b keeps click from joining the table's lines into one paragraph.
_HELP = "\n\n".join(
    [
        "Inspect, replay, verify and manage IntentusNet execution records.",
        "Exit codes (docs/cli.md says more):",
        "\b\n" + "\n".join(f"  {code}  {text}" for code, text in EXIT_CODES.items()),
    ]
)

#: command name -> ``module:attribute`` in this package. A command's module is
#: imported only when that command runs (or help lists it), so ``replay`` does
#: not pay for ``run`` or ``inspect``.
COMMANDS = {
    "records": "records:records",
    "inspect": "records:inspect",
    "replay": "replay:replay",
    "verify": "maintain:verify",
    "copy": "copy:copy",
    "invalidate": "maintain:invalidate",
    "keys": "keys:keys",
    "log": "log:log",
    "reindex": "maintain:reindex",
    "prune": "maintain:prune",
    "stats": "maintain:stats",
    "run": "run:run",
    "serve": "serve:serve",
    "gateway": "gateway:gateway",
    "rerun": "debugging:rerun",
    "fork": "debugging:fork",
    "reask": "reask:reask",
    "resume": "durable:resume",
    "recover": "durable:recover",
    "resolve": "durable:resolve",
    "cancel": "durable:cancel",
    "signal": "signals:signal",
    "diff": "debugging:diff",
    "debug": "debugging:debug",
    "mcp": "mcp:mcp",
    "ui": "ui:ui",
    "witness": "witness:witness",
}


class _Group(click.Group):
    """A click group that loads its commands lazily and maps errors to exit codes."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Return the command names, sorted."""
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """Import and return the command called ``cmd_name``, if there is one."""
        ref = COMMANDS.get(cmd_name)
        if ref is None:
            return None
        module, _, attr = ref.partition(":")
        command: click.Command = getattr(
            importlib.import_module(f".{module}", __package__), attr
        )
        return command

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """Find the command; a mistyped name gets the closest names suggested.

        click suggests from the commands it holds, and this group loads them
        only when asked: the names come from :data:`COMMANDS` here.
        """
        name = args[0] if args else ""
        known = name in COMMANDS or name.startswith("-")
        # Not while completing a word: completion lists the names itself.
        if name and not known and not ctx.resilient_parsing:
            hint = did_you_mean(close_names(name, COMMANDS))
            if hint:
                raise click.UsageError(f"No such command {name!r}.{hint}", ctx)
        return super().resolve_command(ctx, args)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Read the global options; a mistyped one gets the closest suggested."""
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as exc:
            _suggest_options(exc)
            raise

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command, mapping failures to one line and an exit code."""
        debug = bool(ctx.params.get("debug"))
        try:
            return super().invoke(ctx)
        except click.NoSuchOption as exc:
            _suggest_options(exc)
            raise
        except CliFailure as exc:
            exc.debug = debug
            raise
        except IntentusNetError as exc:
            raise CliFailure(str(exc), exc.exit_code, cause=exc, debug=debug) from exc
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except OSError as exc:
            if exc.errno == errno.EPIPE:
                # The reader stopped reading (``intentusnet ... | head``): not
                # an error of ours, and nothing more to say.
                _stdout_to_devnull()
                raise click.exceptions.Exit(0) from None
            raise internal_error(exc, debug) from exc
        except Exception as exc:
            raise internal_error(exc, debug) from exc


def _suggest_options(exc: click.NoSuchOption) -> None:
    """Suggest the command's long options closest to the mistyped one.

    click compares the names with their ``--``, which every long option
    shares: ``--sort`` came out close to ``--json``. :func:`close_names` does not.
    """
    ctx = exc.ctx
    if ctx is None or not exc.option_name.startswith("--"):
        return  # a short option: click suggests none, nor do we
    params = ctx.command.get_params(ctx)
    known = [
        name
        for param in params
        for name in (*param.opts, *param.secondary_opts)
        if name.startswith("--")
    ]
    exc.possibilities = close_names(exc.option_name, known)


def _stdout_to_devnull() -> None:
    """Point stdout at /dev/null, so that flushing it at exit cannot fail again."""
    with contextlib.suppress(OSError, ValueError):  # no fd in a test's runner
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def internal_error(exc: Exception, debug: bool) -> CliFailure:
    """The failure shown for an exception no command expected (exit 1)."""
    hint = "" if debug else " (rerun with --debug for the traceback)"
    message = f"internal error: {type(exc).__name__}: {exc}{hint}"
    return CliFailure(message, 1, cause=exc, debug=debug)


@click.group(cls=_Group, context_settings=_HELP_OPTIONS, help=_HELP)
@click.option(
    "--store",
    "store",
    envvar="INTENTUSNET_STORE",
    show_envvar=True,
    metavar="PATH|URL",
    help=(
        "Execution store: a directory, or a postgresql:// URL."
        "  [default: .intentusnet/records]"
    ),
)
@click.option(
    "--signing-key",
    "signing_key",
    envvar="INTENTUSNET_SIGNING_KEY",
    show_envvar=True,
    metavar="FILE",
    help=(
        "Private key the store signs with where a command writes records "
        "(invalidate). See `intentusnet keys generate`."
    ),
)
@click.option(
    "--debug",
    is_flag=True,
    help="Show the full traceback when a command fails.",
)
@click.version_option(
    __version__, "--version", prog_name="intentusnet", message="%(prog)s %(version)s"
)
@click.pass_context
def cli(
    ctx: click.Context, store: str | None, signing_key: str | None, debug: bool
) -> None:
    """The command group; its help is ``_HELP``, which lists the exit codes."""
    if colour() is False:
        ctx.color = False
    # --debug is read by _Group.invoke
    ctx.obj = Settings(store_name=store or None, signing_key=signing_key or None)


def main(args: Sequence[str] | None = None) -> None:
    """Run the ``intentusnet`` command (the console script's entry point)."""
    cli.main(args=args, prog_name="intentusnet")
