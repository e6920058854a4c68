"""How the command talks: JSON on stdout, people's text, notes on stderr, progress.

Data goes to stdout; warnings, notes and errors go to stderr, so a pipe carries
only data. Colour and progress appear only on a terminal: ``click.echo`` strips
colour when its stream is not one, and ``progress_counter`` hides its line likewise;
``NO_COLOR`` turns colour off everywhere (see :func:`colour`).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Final, Protocol

import click
import orjson

from .._util.jsonvalue import JSONValue

#: Colours of record states in people's output.
STATUS_COLOURS: Final = {
    "completed": "green",
    "failed": "red",
    "in_progress": "yellow",
    "incomplete": "yellow",
    "recording_failure": "yellow",
    "needs_attention": "magenta",
    "cancelled": "magenta",
}


def colour() -> bool | None:
    """``False`` when ``NO_COLOR`` is set (to anything non-empty), else ``None``.

    ``None`` lets click decide: colour on a terminal only.
    """
    return False if os.environ.get("NO_COLOR") else None


def emit_json(value: JSONValue, *, compact: bool = False) -> None:
    """Write ``value`` to stdout as JSON: indented, or on one line if ``compact``."""
    option = orjson.OPT_APPEND_NEWLINE
    if not compact:
        option |= orjson.OPT_INDENT_2
    click.echo(orjson.dumps(value, option=option), nl=False)


def note(message: str) -> None:
    """Write a note for people to stderr."""
    click.echo(message, err=True)


def warn(message: str) -> None:
    """Write ``WARNING: message`` to stderr, in yellow on a terminal."""
    click.secho(f"WARNING: {message}", err=True, fg="yellow")


def status_text(status: str) -> str:
    """Return a record status, coloured for a terminal."""
    return click.style(status, fg=STATUS_COLOURS.get(status))


def ms(value: float | None) -> str:
    """Format a duration in milliseconds for people, ``-`` when unknown."""
    if value is None:
        return "-"
    if value >= 1000:
        return f"{value / 1000:.2f} s"
    return f"{value:.1f} ms" if value >= 10 else f"{value:.2f} ms"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Print rows under headers in aligned columns (colour codes do not count)."""
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(click.unstyle(cell)))
    click.echo(_line(headers, widths, bold=True))
    for row in rows:
        click.echo(_line(row, widths))


def _line(cells: Sequence[str], widths: Sequence[int], *, bold: bool = False) -> str:
    parts = []
    for cell, width in zip(cells, widths, strict=True):
        pad = " " * (width - len(click.unstyle(cell)))
        parts.append((click.style(cell, bold=True) if bold else cell) + pad)
    return "  ".join(parts).rstrip()


def one_line(message: str, limit: int = 2000) -> str:
    """Fold ``message`` onto one line of at most ``limit`` characters."""
    text = " ".join(message.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def working(message: str) -> None:
    """Say on stderr, only on a terminal, that a long step without steps started."""
    if sys.stderr.isatty():
        click.echo(message, err=True)


#: Seconds between two redraws of a progress line: a few a second, not one a record.
REDRAW_INTERVAL: Final = 0.2


def _eta(seconds: float) -> str:
    minutes, seconds = divmod(int(seconds + 0.5), 60)
    hours, minutes = divmod(minutes, 60)
    return (
        f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes}:{seconds:02d}"
    )


class Advance(Protocol):
    """The callback of :func:`progress_counter`: records done, and the total.

    ``total``, when given, replaces the total the line shows (for work that
    learns its size after it started, such as ``prune``).
    """

    def __call__(self, done: int, total: int | None = None) -> None:
        """Record that ``done`` records are done."""
        ...


@contextlib.contextmanager
def progress_counter(
    label: str | None,
    total: int | None = None,
    *,
    clock: Callable[[], float] = time.monotonic,
    force: bool = False,
) -> Iterator[Advance | None]:
    """A progress callback counting records on stderr, only on a terminal.

    ``None`` for no label means no progress (the callback is ``None`` too). The
    line is redrawn at most every :data:`REDRAW_INTERVAL` seconds, however often
    the callback is called, and once more at the end with the final count. With
    ``total`` it shows the share done and an estimate of the time left (added
    in 0.1.0). ``force`` shows it on stderr even when that is not a terminal.
    """
    if label is None or not (force or sys.stderr.isatty()):
        yield None
        return
    started = clock()
    drawn_at = -REDRAW_INTERVAL
    latest = 0
    expected = total

    def line(done: int, now: float) -> str:
        if expected is None or expected <= 0:
            return f"\r{label}: {done:,} records"
        shown = min(done, expected)
        text = f"\r{label}: {shown:,}/{expected:,} records ({shown / expected:.0%})"
        elapsed = now - started
        if 0 < shown < expected and elapsed > 0:
            text += f", about {_eta(elapsed / shown * (expected - shown))} left"
        return text + "\x1b[K"  # clear what a longer line left behind

    def advance(done: int, total: int | None = None) -> None:
        nonlocal drawn_at, latest, expected, started
        if total is not None:
            if expected is None:
                started = clock()  # the work of a known size starts now
            expected = total
        latest = done
        now = clock()
        if now - drawn_at >= REDRAW_INTERVAL:
            drawn_at = now
            click.echo(line(done, now), err=True, nl=False)

    try:
        yield advance
    finally:
        click.echo(line(latest, clock()), err=True)
