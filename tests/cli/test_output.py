"""Output helpers and input parsing: progress, durations, times, one-line errors."""

from __future__ import annotations

import io
import sys
from datetime import UTC, datetime, timedelta

import click
import pytest

from intentusnet.cli.output import one_line, progress_counter, working
from intentusnet.cli.params import Since, parse_duration


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_working_says_so_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a terminal the note of work started appears on stderr."""
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    working("Reindexing")
    assert terminal.getvalue().endswith("Reindexing\n")


def test_working_is_silent_when_piped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Piped, nothing is written to stderr."""
    piped = io.StringIO()
    monkeypatch.setattr(sys, "stderr", piped)
    working("Reindexing")
    assert piped.getvalue() == ""


class _Clock:
    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def test_progress_counter_redraws_a_few_times_a_second(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """20,000 records in 4 s of clock: about 20 redraws, not 20,000, then the total."""
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    clock = _Clock(0.0002)
    with progress_counter("Verifying records", 20_000, clock=clock) as advance:
        assert advance is not None
        for done in range(1, 20_001):
            advance(done)
    text = terminal.getvalue()
    assert 15 <= text.count("\r") <= 25
    assert len(text.encode()) < 3_000
    assert text.endswith("Verifying records: 20,000/20,000 records (100%)\x1b[K\n")
    assert "left" in text  # an estimate while it ran


def test_progress_counter_eta(monkeypatch: pytest.MonkeyPatch) -> None:
    """A quarter done in 10 s: about 0:30 left for the rest."""
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    clock = _Clock(10.0)  # started at 10, the first call at 20, ...
    with progress_counter("Copying records", 400, clock=clock) as advance:
        assert advance is not None
        advance(100)  # at 20 s: 10 s for 100
    assert "100/400 records (25%), about 0:30 left" in terminal.getvalue()


def test_progress_counter_silent_when_piped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Piped, there is no callback and nothing is written."""
    piped = io.StringIO()
    monkeypatch.setattr(sys, "stderr", piped)
    with progress_counter("Verifying records", 10) as advance:
        assert advance is None
    assert piped.getvalue() == ""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("45s", timedelta(seconds=45)),
        ("15m", timedelta(minutes=15)),
        ("12h", timedelta(hours=12)),
        ("7d", timedelta(days=7)),
        ("2w", timedelta(weeks=2)),
        ("1h30m", timedelta(minutes=90)),
        ("1.5d", timedelta(hours=36)),
        ("0s", timedelta(0)),
        (" 7D ", timedelta(days=7)),
    ],
)
def test_parse_duration(text: str, expected: timedelta) -> None:
    """Durations are a number and a unit, or a sum of them."""
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "7", "d", "7 days", "-1d", "1y", "1h 30m"])
def test_parse_duration_refuses(text: str) -> None:
    """Anything else is a ValueError that shows the accepted form."""
    with pytest.raises(ValueError, match="is not a duration"):
        parse_duration(text)


def test_since_accepts_times_and_durations() -> None:
    """ISO dates and times (naive = UTC) and durations ago."""
    since = Since()
    assert since.convert("2026-11-01", None, None) == datetime(2026, 11, 1, tzinfo=UTC)
    assert since.convert("2026-11-01T09:30:00+02:00", None, None) == datetime(
        2026, 11, 1, 7, 30, tzinfo=UTC
    )
    ago = datetime.now(UTC) - since.convert("1h", None, None)
    assert timedelta(minutes=59) < ago < timedelta(minutes=61)
    with pytest.raises(click.BadParameter, match="neither an ISO 8601 time"):
        since.convert("last tuesday", None, None)


def test_one_line_folds_and_truncates() -> None:
    """Messages are folded onto one line and cut to the limit."""
    assert one_line("a\nb\r\n  c") == "a b c"
    long = one_line("x" * 5000, limit=100)
    assert len(long) == 100
    assert long.endswith("...")


def test_progress_counter_learns_its_total_late(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A total given with the first count (prune) shows, with an estimate from then."""
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    clock = _Clock(10.0)  # entered at 10 s; each reading of the clock is 10 s on
    with progress_counter("Deleting records", clock=clock) as advance:
        assert advance is not None
        advance(0, 400)  # the total is learnt at 20 s (drawn at 30 s)
        advance(100, 400)  # at 40 s: 20 s for 100 since the total was known
    text = terminal.getvalue()
    # 1:00 left, not 1:30: the time before the total was known is not counted
    assert "100/400 records (25%), about 1:00 left" in text
