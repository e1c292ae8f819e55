"""Number formats shared by the report, the Markdown and the dashboard."""

from __future__ import annotations

from rightsize.report.fmt import num, pct


def test_a_share_just_under_one_is_not_rounded_to_100_percent() -> None:
    """resnet50-api's T4 busy 0.9957 read "100%" beside a headroom of 0.8."""
    assert pct(0.9956693558474277) == "99.6%"
    assert pct(0.99996) == "99.9%"  # never "100.0%" below 1
    assert pct(1.0) == "100%" and pct(0.85) == "85%" and pct(0.99) == "99%" and pct(None) == "-"


def test_figures_read_side_by_side_keep_their_trailing_zeros() -> None:
    """ "p50 / p95 / p99 16.3 / 25 / 30.3 ms": 24.96 lost its third digit."""
    assert [num(v, zeros=True) for v in (16.31228, 24.96331, 30.26170)] == ["16.3", "25.0", "30.3"]
    assert num(24.96331) == "25" and num(8, zeros=True) == "8.00" and num(1878.2, zeros=True) == "1,878"
    assert num(99.95, zeros=True) == "100"  # rounds up to three digits: no trailing point
