"""UTC timestamps as records write them."""

import datetime as dt

from hypothesis import given
from hypothesis import strategies as st

from intentusnet._util.time import micros_of, parse_utc, utc_text


@given(st.datetimes(min_value=dt.datetime(1970, 1, 1)))
def test_utc_text_is_iso_8601_in_utc(moment):
    """utc_text writes any time since 1970 to the microsecond; parse_utc reads it."""
    micros = micros_of(moment)
    text = utc_text(micros)
    assert text == moment.isoformat(timespec="microseconds") + "Z"
    assert parse_utc(text) == micros


def test_utc_text_keeps_a_zero_fraction():
    """A whole second keeps its six zeros: every timestamp has the same width."""
    second = dt.datetime(2026, 11, 22, 7, 20, tzinfo=dt.UTC)
    assert utc_text(micros_of(second)) == "2026-11-22T07:20:00.000000Z"
