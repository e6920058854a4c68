"""Fast construction of the frozen record dataclasses, for the record reader.

A frozen dataclass's ``__init__`` goes through ``object.__setattr__`` once per
field, which is most of what building a record costs. The reader builds the
same objects by setting their slots directly; nothing else should.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import Final, TypeVar

from ._json import JSONObject
from .record import (
    EventType,
    ExecutionEvent,
    ExecutionHeader,
    ExecutionRecord,
    RecordSummary,
)

_Setter = Callable[[object, object], None]
_D = TypeVar("_D")


def _slot_setters(cls: type, count: int) -> tuple[_Setter, ...]:
    names = [f.name for f in fields(cls)]
    assert len(names) == count, f"{cls.__name__} has {len(names)} fields"
    return tuple(cls.__dict__[name].__set__ for name in names)


_new = object.__new__
_EVENT_SET: Final = _slot_setters(ExecutionEvent, 6)
_HEADER_SET: Final = _slot_setters(ExecutionHeader, 15)
_RECORD_SET: Final = _slot_setters(ExecutionRecord, 5)
_SUMMARY_SET: Final = _slot_setters(RecordSummary, 10)


def new_event(
    seq: int,
    kind: EventType,
    at_ms: float,
    data: JSONObject,
    prev_hash: str,
    hash: str,  # the field's name
) -> ExecutionEvent:
    """Build an ``ExecutionEvent`` from checked values."""
    event = _new(ExecutionEvent)
    s0, s1, s2, s3, s4, s5 = _EVENT_SET
    s0(event, seq)
    s1(event, kind)
    s2(event, at_ms)
    s3(event, data)
    s4(event, prev_hash)
    s5(event, hash)
    return event


def _build(
    cls: type[_D], setters: tuple[_Setter, ...], values: tuple[object, ...]
) -> _D:
    made = _new(cls)
    for setter, value in zip(setters, values, strict=True):
        setter(made, value)
    return made


def new_header(*values: object) -> ExecutionHeader:
    """Build an ``ExecutionHeader`` from checked values, in field order."""
    return _build(ExecutionHeader, _HEADER_SET, values)


def new_record(*values: object) -> ExecutionRecord:
    """Build an ``ExecutionRecord`` from checked values, in field order."""
    return _build(ExecutionRecord, _RECORD_SET, values)


def new_summary(*values: object) -> RecordSummary:
    """Build a ``RecordSummary`` from checked values, in field order."""
    return _build(RecordSummary, _SUMMARY_SET, values)
