"""The explorer's timeline: bars to scale, read from golden records."""

from __future__ import annotations

from pathlib import Path

import pytest

from intentusnet.record.reader import parse_record
from intentusnet.server.ui.timeline import draw

RECORDS = Path(__file__).resolve().parents[3] / "records"


def _golden(name: str):  # type: ignore[no-untyped-def]
    data = (RECORDS / f"{name}.jsonl").read_bytes()
    first = data.split(b"\n", 1)[0]
    execution_id = first.split(b'"executionId":"', 1)[1].split(b'"', 1)[0].decode()
    return parse_record(data, execution_id, lambda owner: False)


def test_steps_record_bars() -> None:
    """One attempt bar, one bar per step, the failed step carrying its traceback."""
    timeline = draw(_golden("steps"))
    kinds = [bar.kind for bar in timeline.bars]
    assert kinds.count("attempt") == 1
    assert [bar.label for bar in timeline.bars if bar.kind == "step"] == [
        "crm.lookup",
        "email.send",
        "crm.score",
    ]
    score = next(bar for bar in timeline.bars if bar.label == "crm.score")
    assert score.outcome == "error"
    assert score.error == "AssertionError: contact required"
    assert score.traceback is not None
    assert score.traceback.startswith("Traceback")


def test_bars_are_to_scale() -> None:
    """Positions are percentages of the execution's length, within 0-100."""
    record = _golden("steps")
    timeline = draw(record)
    assert timeline.total_ms >= max(event.at_ms for event in record.events)
    for bar in timeline.bars:
        assert 0 <= bar.left <= 100
        assert 0 < bar.width <= 100.4
        if bar.end_ms is not None:
            expected = (bar.end_ms - bar.start_ms) / timeline.total_ms * 100
            assert bar.width == pytest.approx(max(expected, 0.4), abs=0.01)
    attempt = next(bar for bar in timeline.bars if bar.kind == "attempt")
    steps = [bar for bar in timeline.bars if bar.kind == "step"]
    assert all(attempt.left <= step.left for step in steps)


def test_incomplete_record_bar_runs_to_the_end() -> None:
    """An attempt that never ended is drawn to the end of what was recorded."""
    timeline = draw(_golden("incomplete"))
    open_bars = [bar for bar in timeline.bars if bar.end_ms is None]
    assert open_bars
    assert all(bar.outcome == "running" for bar in open_bars)
    assert all(bar.left + bar.width == pytest.approx(100, abs=0.5) for bar in open_bars)


def test_older_record_axis_starts_at_its_opening() -> None:
    """A record that does not say when its call began starts its axis when opened."""
    record = _golden("completed")
    timeline = draw(record)
    assert timeline.opened_ms is None
    assert [bar.span for bar in timeline.bars if bar.kind == "phase"] == [
        "phase-answer"
    ]
    assert not [m for m in timeline.markers if m.label.startswith("answer ready")]
    assert timeline.total_ms == record.events[-1].at_ms
