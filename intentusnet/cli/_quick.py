"""The console script's entry point, which runs ``replay ID`` without loading click.

``intentusnet replay ID`` is the command that must start fast, and importing
click costs about as much as all of replay's own work (docs/performance.md). So
``main`` answers exactly one form of command line itself -- ``replay ID``, with
``--json`` before or after ID and nothing else -- using the library calls the
click command makes, and hands every other command line to click untouched.

One rule keeps the two paths from disagreeing: this path decides nothing.
It writes nothing until it holds the whole answer, and whatever it does not
expect -- any other option, an ID that looks like an option, shell completion,
a missing store, any error while replaying -- makes it step aside before a
byte is written. Click then runs the command from the start and says what went
wrong in its usual way. A failing replay thus runs twice; a working one never
imports click.
"""

from __future__ import annotations

import errno
import gc
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from .._json import JSONValue

#: Set by a shell asking click for completions (click's own variable name).
_COMPLETE = "_INTENTUSNET_COMPLETE"


def main(args: Sequence[str] | None = None) -> None:
    """Run the ``intentusnet`` command (the console script's entry point)."""
    # click reads sys.argv[1:] too (on Windows it also expands globs, ~ and
    # variables, but no character of a valid execution id is one of those).
    argv = sys.argv[1:] if args is None else list(args)
    # Run as the console script (no ``args``), the process ends with the
    # command: a replay makes no garbage cycles worth collecting, so the cyclic
    # collector stays off while it imports and replays, and what is alive at
    # the end is frozen, so that the interpreter's shutdown does not walk it.
    # That is about a seventh of the command's work. Click runs as usual.
    own_process = args is None
    if own_process:
        gc.disable()
    try:
        answer = _quick_replay(argv)
    except KeyboardInterrupt:
        _aborted()
    if answer is not None:
        _print(answer, freeze=own_process)
    if own_process:
        gc.enable()
    from .app import cli

    cli.main(args=args, prog_name="intentusnet")


def json_bytes(value: JSONValue, *, compact: bool = False) -> bytes:
    """``value`` as the command prints JSON: indented, or on one line if ``compact``."""
    from .. import _jsoncodec as codec

    option = codec.OPT_APPEND_NEWLINE
    if not compact:
        option |= codec.OPT_INDENT_2
    return codec.dumps(value, option=option)


def _quick_replay(argv: list[str]) -> bytes | None:
    """What ``replay ID [--json]`` prints, or ``None`` to leave it to click."""
    if len(argv) not in (2, 3) or argv[0] != "replay" or os.environ.get(_COMPLETE):
        return None
    rest = argv[1:]
    compact = "--json" in rest
    if compact:
        rest.remove("--json")
    if len(rest) != 1 or rest[0].startswith("-") or rest[0] == "last":
        return None  # ``last`` is resolved by click's ID parameter
    if getattr(sys.stdout, "buffer", None) is None:
        return None  # no stdout, or not an ordinary one: click knows what to do
    from .._jsoncodec import use_stdlib

    # Before the record modules are imported: they bind the JSON functions then.
    use_stdlib()
    from ..replay import ReplayEngine
    from ..store import FileExecutionStore

    # No --store was given, so the store is INTENTUSNET_STORE's or the default,
    # as FileExecutionStore(None) picks it; it must exist (see open_store).
    store = FileExecutionStore()
    try:
        if not store.root.is_dir():
            return None
        result = ReplayEngine.from_store(store, rest[0]).replay()
        return json_bytes(result.to_json(), compact=compact)
    except Exception:
        return None  # click replays again and reports the failure
    finally:
        store.close()


def _print(answer: bytes, *, freeze: bool = False) -> NoReturn:
    """Write the answer as ``click.echo`` writes bytes, and exit as click does.

    ``freeze``: move every object to the collector's permanent generation first
    (the process is about to end; see ``main``).
    """
    try:
        sys.stdout.flush()
        sys.stdout.buffer.write(answer)
        sys.stdout.buffer.flush()
    except KeyboardInterrupt:
        _aborted()
    except OSError as exc:
        import click.utils

        if exc.errno == errno.EPIPE:
            # As click's main: quiet the flush at exit, exit 1 (``... | head``).
            sys.stdout = click.utils.PacifyFlushWrapper(sys.stdout)
            sys.stderr = click.utils.PacifyFlushWrapper(sys.stderr)
            sys.exit(1)
        from .app import internal_error

        failure = internal_error(exc, debug=False)
        failure.show()
        sys.exit(failure.exit_code)
    if freeze:
        gc.freeze()
    sys.exit(0)


def _aborted() -> NoReturn:
    """End as click ends a command stopped by Ctrl-C."""
    import click

    click.echo(file=sys.stderr)
    click.echo("Aborted!", file=sys.stderr)
    sys.exit(1)
