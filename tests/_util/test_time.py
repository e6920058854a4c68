"""UTC timestamps as records and wire forms write them."""

import datetime as dt

from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter

from intentusnet._util.time import micros_of, utc_text, wire_utc

_PYDANTIC = TypeAdapter(dt.datetime)
_OFFSETS = st.sampled_from(
    [dt.UTC, dt.timezone(dt.timedelta(0)), dt.timezone(dt.timedelta(hours=-2))]
)


@given(
    st.datetimes(min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30)),
    _OFFSETS,
    st.booleans(),
)
def test_wire_utc_is_what_pydantic_writes(moment, zone, whole_second):
    """wire_utc gives pydantic's JSON text for any aware datetime, any year."""
    if whole_second:
        moment = moment.replace(microsecond=0)
    aware = moment.replace(tzinfo=zone)
    assert wire_utc(aware) == _PYDANTIC.dump_python(aware, mode="json")


def test_wire_utc_drops_a_zero_fraction_only():
    """A whole second has no fraction; one microsecond keeps all six digits."""
    second = dt.datetime(2026, 11, 22, 7, 20, tzinfo=dt.UTC)
    assert wire_utc(second) == "2026-11-22T07:20:00Z"
    later = second + dt.timedelta(microseconds=1)
    assert wire_utc(later) == "2026-11-22T07:20:00.000001Z"
    assert utc_text(micros_of(later)) == wire_utc(later)
