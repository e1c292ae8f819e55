"""Quantities users type and read: sizes and durations."""

from __future__ import annotations

import pytest

from rightsize.errors import SpecError
from rightsize.units import format_bytes, format_hours, format_usd, parse_bytes


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


def test_a_small_instance_rate_keeps_two_significant_digits() -> None:
    """A Standard_F2s_v2 at $0.0846/h read "$0.08/h" in the recommendation beside 0.085 in the table."""
    assert [format_usd(x) for x in (0.0846, 0.0042, 0.34, 12.345, 1234.5, 0.0)] == [
        "$0.085", "$0.0042", "$0.34", "$12.35", "$1,234", "$0.00"
    ]  # fmt: skip


def test_two_different_durations_never_read_alike() -> None:
    """A deadline reason read 'misses the deadline ... 10 h > 10 h (median 6.55 h)'."""
    from rightsize.units import format_hours_apart

    assert format_hours_apart(10.004, 10) == ("10.004 h", "10 h")
    assert format_hours_apart(10.3, 10) == ("10.3 h", "10 h")  # apart at three digits: as format_hours
    assert format_hours_apart(0.5001, 0.5) == ("30.01 min", "30 min")
    assert format_hours_apart(2.0, 2.0) == ("2 h", "2 h")


def test_a_share_just_under_one_never_reads_100_percent() -> None:
    """The plan's "busy 100%" for a replica 99.57% busy, beside a headroom of 0.8: one rule for the CLI, the plan's
    words and the report."""
    from rightsize.units import format_share

    assert format_share(0.9956693558474277) == "99.6%" and format_share(0.99996) == "99.9%"
    assert format_share(1.0) == "100%" and format_share(0.85) == "85%" and format_share(0.99) == "99%"
