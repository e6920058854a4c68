"""``intentusnet replay ID --step``: walk a record one verified line at a time.

Each line is pulled from ``ReplayEngine.events()`` when first shown, so its hash
is checked as the walk reaches it; going back shows lines already checked. On
a terminal the keys act at once (``n``, space, Enter or the right arrow: next;
``p``, backspace or the left arrow: previous; ``q``, Escape or Ctrl-C: quit)
and each screen replaces the last; from a pipe, each line of input is a command
(``n``, ``p``, ``q``; an empty line is next; end of input quits).
Like the rest of ``replay``, this loads neither pydantic nor httpx.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Final

import click
import orjson

if TYPE_CHECKING:
    from ..replay import ReplayEngine, VerifiedEvent

_NEXT: Final = frozenset({"n", " ", "\r", "\n", "\x1b[C", "l", "j", ""})
_PREVIOUS: Final = frozenset({"p", "\x7f", "\x08", "\x1b[D", "h", "k"})
_QUIT: Final = frozenset({"q", "\x1b", "\x03", "\x04"})
_KEYS: Final = "[n]ext  [p]revious  [q]uit"
#: Clear the screen and put the cursor top left (ANSI).
_CLEAR: Final = "\033[2J\033[1;1H"


def step_through(engine: ReplayEngine) -> int:
    """Walk the record's lines; return how many failed their check."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return _walk(engine, _line_command(iter(sys.stdin.readline, "")), False)
    with _terminal_keys() as read:
        return _walk(engine, read, True)


def _walk(engine: ReplayEngine, read: Callable[[], str], interactive: bool) -> int:
    walk = engine.events()
    seen: list[VerifiedEvent] = []
    at = 0
    ended = _pull(walk, seen)
    while True:
        if interactive:
            # Not click.clear(): it is stripped with colour (NO_COLOR); this is
            # not colour but where the screen starts.
            click.echo(_CLEAR, nl=False, color=True)
        _show(engine, seen[at], seen[-1].verified, ended and at == len(seen) - 1)
        command = read()
        if command in _QUIT:
            break
        if command in _PREVIOUS:
            at = max(at - 1, 0)
        elif command in _NEXT:
            if at + 1 == len(seen) and not ended:
                ended = _pull(walk, seen)
            if at + 1 < len(seen):
                at += 1
            elif not interactive:
                break  # piped past the end: done
        else:
            click.echo(f"unknown key {command!r}: {_KEYS}", err=True)
    return sum(not line.ok for line in seen)


def _pull(walk: Iterator[VerifiedEvent], seen: list[VerifiedEvent]) -> bool:
    """Check and keep the next line; return whether it was the last one."""
    line = next(walk, None)
    if line is not None:
        seen.append(line)
    return line is None or line.line == line.total


@contextlib.contextmanager
def _terminal_keys() -> Iterator[Callable[[], str]]:
    """Read keys one at a time, the terminal in cbreak mode for the whole walk.

    Not ``click.getchar()``: it switches the terminal to raw mode for each key,
    which discards what was typed meanwhile, so keys pressed while a screen was
    being drawn were lost. An arrow key's escape sequence is read whole; a lone
    Escape is Escape.
    """
    import os
    import select
    import termios
    import tty

    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    tty.setcbreak(fd, termios.TCSANOW)  # TCSANOW: keep keys typed already

    def read() -> str:
        try:
            key = os.read(fd, 1)
            if key == b"\x1b":  # an arrow's sequence follows at once, if any
                while len(key) < 3 and select.select([fd], [], [], 0.05)[0]:
                    key += os.read(fd, 1)
        except KeyboardInterrupt:
            return "q"
        return key.decode("latin-1") if key else "q"  # b"": end of input

    try:
        yield read
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def _line_command(lines: Iterator[str]) -> Callable[[], str]:
    def read() -> str:
        line = next(lines, None)
        return "q" if line is None else line.strip().lower()[:1]

    return read


def _show(engine: ReplayEngine, line: VerifiedEvent, verified: int, last: bool) -> None:
    """One screen: the line, its check, and the lines verified so far."""
    record = engine.record
    header = record.header
    click.secho(
        f"{record.execution_id}  {header.intent_name}@{header.intent_version}  "
        f"{header.status.value}  (step-through replay)",
        bold=True,
    )
    event = line.event
    if event is None:
        title = "header" if line.line == 1 else "unreadable line"
        click.echo(f"Line {line.line}/{line.total}  {title}")
        body: object = record.header.to_json() if line.line == 1 else None
    else:
        agent = event.data.get("agent")
        who = f"  {agent}" if isinstance(agent, str) else ""
        click.echo(
            f"Line {line.line}/{line.total}  event {event.seq}  {event.type.value}"
            f"{who}  at {event.at_ms:.3f} ms"
        )
        body = event.data
    if body is not None:
        click.echo(orjson.dumps(body, option=orjson.OPT_INDENT_2).decode())
    if line.ok:
        link = "the start of the chain" if line.line == 1 else f"line {line.line - 1}"
        check = click.style("verified", fg="green") + f" (links to {link})"
    else:
        check = click.style(f"FAILED: {line.problem}", fg="red")
    click.echo(f"Line hash  {line.hash[:23]}...  {check}")
    click.echo(f"{verified}/{line.total} events verified")
    if last:
        verdict = "VALID" if verified == line.total else "INVALID"
        click.echo(f"End of record: {line.total - verified} failures - {verdict}")
    click.echo(_KEYS)
