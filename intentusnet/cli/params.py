"""What the command reads from people: durations, times, JSON files, failures.

Parsing user input belongs here; everything the input means belongs to the
library. ``CliFailure`` is the one way a command reports a mistake: one line on
stderr and the exit code of DESIGN §8.
"""

from __future__ import annotations

import contextlib
import re
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Final, TypeVar

import click

from .._util.jsonvalue import JSONObject, parse_json
from ..errors import EnvelopeValidationError
from .output import colour, one_line

#: Exit code of a usage error (click's own, and ours for bad files and stores).
USAGE: Final = 2
#: Envelope files larger than this are refused rather than read into memory.
MAX_JSON_FILE_BYTES: Final = 64 * 1024 * 1024
#: How similar a name must be to be suggested (difflib's default cutoff).
_CLOSE: Final = 0.6

_UNITS: Final = {"w": 604_800, "d": 86_400, "h": 3_600, "m": 60, "s": 1}
# Patterns, not compiled ones: ``re`` compiles (and caches) them on first use, so
# commands that take no duration do not pay for compiling them at start-up.
_DURATION: Final = r"(?:(\d+(?:\.\d+)?)([wdhms]))+"
_PART: Final = r"(\d+(?:\.\d+)?)([wdhms])"
_F = TypeVar("_F", bound="Callable[..., object]")


if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from ..routing.redact import Redactor

    _DurationType = click.ParamType[timedelta]
    _TimeType = click.ParamType[datetime]
    _ChoiceType = click.Choice[str]
else:  # click < 8.2 has no generic ParamType
    _DurationType = _TimeType = click.ParamType
    _ChoiceType = click.Choice


class CliFailure(click.ClickException):
    """A failure shown as one ``Error:`` line on stderr, exiting with ``exit_code``.

    Args:
        message: what went wrong, folded onto one line.
        exit_code: the process exit code (DESIGN §8).
        cause: the exception behind it, whose traceback ``--debug`` prints.
        debug: print that traceback before the line.
    """

    def __init__(
        self,
        message: str,
        exit_code: int,
        *,
        cause: BaseException | None = None,
        debug: bool = False,
    ) -> None:
        super().__init__(one_line(message))
        # click 8.5 declares exit_code a ClassVar; ours differs per failure, and
        # click reads it from the instance.
        setattr(self, "exit_code", exit_code)  # noqa: B010
        self.cause = cause
        self.debug = debug

    def show(self, file: object = None) -> None:
        """Print the traceback when debugging, then the one-line message."""
        if self.debug and self.cause is not None:
            import traceback  # only when debugging: it costs start-up time

            click.echo("".join(traceback.format_exception(self.cause)), err=True)
        # Shown after the command's context is gone: NO_COLOR is asked here.
        click.secho(f"Error: {self.message}", err=True, fg="red", color=colour())


def close_names(given: str, known: Iterable[str]) -> list[str]:
    """The names in ``known`` closest to the mistyped ``given``, best first (up to 3).

    Leading dashes are not compared: every long option has them, and counted
    they made ``--sort`` look close to ``--json``.
    """
    word = given.lstrip("-")
    bare = {name.lstrip("-"): name for name in known}
    # difflib's similarity of two strings is at most 2 * the shorter length
    # over both lengths (its ``real_quick_ratio``), so a name that cannot reach
    # the cutoff by length alone is not compared; when none can (an execution
    # id beside ``last``), difflib is not even imported.
    near = [
        name
        for name in bare
        if 2 * min(len(name), len(word)) >= _CLOSE * (len(name) + len(word))
    ]
    if not near:
        return []
    import difflib  # only for a mistake: no command needs it

    close = difflib.get_close_matches(word, near, n=3, cutoff=_CLOSE)
    return [bare[name] for name in close]


def did_you_mean(close: Sequence[str]) -> str:
    """`` Did you mean 'x'?`` (or ``one of 'x', 'y'``) for :func:`close_names`.

    ``""`` when nothing is close: a far guess helps no one.
    """
    if not close:
        return ""
    shown = ", ".join(repr(name) for name in close)
    which = shown if len(close) == 1 else f"one of {shown}"
    return f" Did you mean {which}?"


class Choice(_ChoiceType):
    """``click.Choice``, a mistyped value getting the closest choices suggested."""

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> str:
        """Return the choice given, or fail naming the choices and the closest."""
        try:
            return str(super().convert(value, param, ctx))
        except click.BadParameter as exc:
            hint = did_you_mean(close_names(str(value), map(str, self.choices)))
            if not hint:
                raise
            self.fail(f"{exc.message}{hint}", param, ctx)


def parse_duration(text: str) -> timedelta:
    """Parse ``90s``, ``15m``, ``12h``, ``7d``, ``2w`` or a sum such as ``1h30m``.

    Raises:
        ValueError: ``text`` is not of that form.
    """
    cleaned = text.strip().lower()
    if not re.fullmatch(_DURATION, cleaned):
        raise ValueError(
            f"{text!r} is not a duration; use a number and a unit of "
            "s, m, h, d or w, e.g. 30m, 12h, 7d, 1h30m"
        )
    seconds = sum(float(n) * _UNITS[unit] for n, unit in re.findall(_PART, cleaned))
    return timedelta(seconds=seconds)


class Duration(_DurationType):
    """A click parameter holding a duration such as ``7d`` or ``1h30m``."""

    name = "duration"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> timedelta:
        """Parse the value, or fail as a usage error."""
        if isinstance(value, timedelta):
            return value
        try:
            return parse_duration(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class Since(_TimeType):
    """A click parameter for a point in time: ISO 8601, or a duration ago."""

    name = "iso|duration"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> datetime:
        """Parse ``2026-11-01``, ``2026-11-01T09:30:00Z`` or ``7d`` (7 days ago)."""
        if isinstance(value, datetime):
            return value
        text = str(value).strip()
        with contextlib.suppress(ValueError):
            return datetime.now(UTC) - parse_duration(text)
        try:
            when = datetime.fromisoformat(text)
        except ValueError:
            self.fail(
                f"{text!r} is neither an ISO 8601 time (2026-11-01, "
                "2026-11-01T09:30:00Z) nor a duration (7d, 12h)",
                param,
                ctx,
            )
        # A time without a zone is read as UTC, the zone records are written in.
        return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def read_json_object(name: str, what: str = "envelope file") -> JSONObject:
    """Read a JSON object from the file ``name``, or from stdin when it is ``-``.

    Raises:
        CliFailure: the file cannot be read or is too large (exit 2).
        EnvelopeValidationError: it is not JSON, or not a JSON object.
    """
    shown = "stdin" if name == "-" else repr(name)
    try:
        if name == "-":
            data = sys.stdin.buffer.read(MAX_JSON_FILE_BYTES + 1)
        else:
            with Path(name).open("rb") as file:
                data = file.read(MAX_JSON_FILE_BYTES + 1)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise CliFailure(f"cannot read {what} {shown}: {reason}", USAGE) from exc
    if len(data) > MAX_JSON_FILE_BYTES:
        limit = MAX_JSON_FILE_BYTES // (1024 * 1024)
        raise CliFailure(f"{what} {shown} is larger than {limit} MiB", USAGE)
    try:
        value = parse_json(data)
    except ValueError as exc:
        raise EnvelopeValidationError(
            f"{what} {shown} is not valid JSON: {exc}"
        ) from None
    if not isinstance(value, dict):
        kind = "array" if isinstance(value, list) else type(value).__name__
        raise EnvelopeValidationError(
            f"{what} {shown} holds a {kind}, not a JSON object"
        )
    return value


def keyed_redactor(key_file: str | None, make: Callable[[bytes], Redactor]) -> Redactor:
    """The ``Redactor`` that ``make`` builds with the key in ``--redact-key-file``.

    Raises:
        CliFailure: no key file (a random key would give other markers every
            run, so nothing recorded with one would match a request again), or
            rules the ``Redactor`` refuses (exit 2).
    """
    if key_file is None:
        raise CliFailure("--redact needs --redact-key-file (a stable key)", USAGE)
    key = Path(key_file).read_bytes().strip()
    try:
        return make(key)
    except (TypeError, ValueError) as exc:
        raise CliFailure(f"--redact: {exc}", USAGE) from None


def options(*added: Callable[[_F], _F]) -> Callable[[_F], _F]:
    """One decorator adding the options ``added``, in that order in ``--help``."""

    def add(command: _F) -> _F:
        for option in reversed(added):
            command = option(command)
        return command

    return add


def prices_option(purpose: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """The ``--prices FILE`` option (or ``INTENTUSNET_PRICES``), as ``prices_file``.

    ``purpose`` ends the help text: what the prices are used for.
    """
    return click.option(
        "--prices",
        "prices_file",
        envvar="INTENTUSNET_PRICES",
        show_envvar=True,
        metavar="FILE",
        help=f"Price table (JSON, or TOML as *.toml) for {purpose}.",
    )


#: The levels ``--log-level`` takes, for the commands that serve HTTP.
LOG_LEVELS: Final = ("critical", "error", "warning", "info", "debug")
_SIZE: Final = r"(?i)(\d+)\s*(|b|k|kb|kib|m|mb|mib)"
_SIZE_UNITS: Final = {"": 1, "b": 1, "k": 1024, "kb": 1000, "kib": 1024}
_SIZE_UNITS.update({"m": 1024**2, "mb": 1000**2, "mib": 1024**2})


def parse_size(text: str) -> int:
    """Parse ``1048576``, ``512KiB``, ``1MiB`` or ``2MB`` as a number of bytes.

    Raises:
        ValueError: not of that form, or zero.
    """
    match = re.fullmatch(_SIZE, text.strip())
    if match is None or int(match.group(1)) == 0:
        raise ValueError(f"{text!r} is not a size; use e.g. 1048576, 512KiB or 1MiB")
    return int(match.group(1)) * _SIZE_UNITS[match.group(2).lower()]


def size_param(ctx: click.Context, param: click.Parameter, value: str) -> int:
    """A click callback reading a size option with :func:`parse_size`."""
    try:
        return parse_size(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None
