"""Quantities users type and read: sizes and durations."""

from __future__ import annotations

import pytest

from rightsize.errors import SpecError
from rightsize.units import format_bytes, format_hours, parse_bytes


def test_sizes_parse_and_format() -> None:
    assert parse_bytes("4GiB") == 4 * 2**30 and parse_bytes("2GB") == 2 * 10**9
    assert format_bytes(1536) == "1.5 KiB" and format_bytes(None) == "-"
    with pytest.raises(SpecError, match="memory"):
        parse_bytes("lots")


def test_durations_read_in_minutes_below_an_hour() -> None:
    assert [format_hours(h) for h in (0.04, 0.25, 1.0, 13.26, 1234.5)] == [
        "2.4 min", "15 min", "1 h", "13.3 h", "1,234 h",
    ]  # fmt: skip
    assert format_hours(0.001) != "0 min" and format_hours(0.0) == "0 min"
