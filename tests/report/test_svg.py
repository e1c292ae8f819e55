"""The SVG chart kit: marks per point, skipped charts, scales, escaping, well-formed SVG."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from rightsize.report.svg import Axis, Point, Ref, Series, _Scale, xy_chart
from rightsize.report.svg_bars import Bar, BarSeries, bar_chart, stacked_hbars

XSS = "<script>alert(1)</script>"


def _svg(fragment: str) -> ET.Element:
    m = re.search(r"<svg.*</svg>", fragment, re.S)
    assert m, "no <svg> in the figure"
    return ET.fromstring(m.group(0))  # raises when the SVG is not well-formed XML


def test_xy_chart_draws_one_mark_per_point_with_reference_lines() -> None:
    s1 = Series("a", [Point(1, 10, "first"), Point(2, 12), Point(4, 20)], band=[(1, 8, 12), (4, 15, 25)])
    s2 = Series("b", [Point(1, 5), Point(8, 40)], marker="square", hollow=True, dashed=True)
    html = xy_chart("demo", "Demo", [s1, s2], Axis("x", log=True), Axis("y"), refs=[Ref("y", 30, "SLO 30 ms")])
    assert 'data-chart="demo"' in html
    root = _svg(html)
    ns = "{http://www.w3.org/2000/svg}"
    marks = [e for e in root.iter() if "pt" in (e.get("class") or "").split()]
    assert len(marks) == 5
    assert {e.tag.replace(ns, "") for e in marks} == {"circle", "rect"}
    assert len([e for e in root.iter() if e.get("class") == "band"]) == 1
    assert "SLO 30 ms" in html and 'data-ref="SLO 30 ms"' in html
    assert "<title>first</title>" in html  # the tooltip


def test_chart_without_usable_points_is_skipped_with_its_reason() -> None:
    html = xy_chart("empty", "Empty", [Series("a", [Point(0, 5), Point(-1, 3)])], Axis("x", log=True), Axis("y"),
                    empty="nothing measured")  # fmt: skip
    assert 'data-chart-skipped="empty"' in html and 'data-chart="' not in html
    assert "nothing measured" in html


def test_log_axis_drops_non_positive_and_non_finite_points() -> None:
    pts = [Point(1, 1), Point(2, 0), Point(4, float("nan")), Point(8, float("inf")), Point(16, 3)]
    html = xy_chart("log", "Log", [Series("a", pts)], Axis("x", log=True), Axis("y", log=True))
    assert html.count('class="pt"') == 2


def test_linear_scale_starts_at_zero_with_nice_ticks_and_maps_ends() -> None:
    s = _Scale(3.2, 87.0, Axis("y"), 300.0, 20.0)
    assert s.ticks[0] == 0.0 and s.ticks[-1] >= 87.0
    steps = {round(b - a, 9) for a, b in zip(s.ticks, s.ticks[1:], strict=False)}
    assert steps == {20.0}
    assert s(s.lo) == 300.0 and s(s.hi) == 20.0
    assert s(10) > s(50)  # y grows upwards


@pytest.mark.parametrize("lo, hi", [(1, 2), (1, 1), (2, 3), (1, 16)])
def test_a_count_axis_ticks_whole_numbers(lo: int, hi: int) -> None:
    """A training plan of 1-2 nodes had ticked its cluster size at 1.2, 1.4, 1.6 nodes."""
    ticks = _Scale(lo, hi, Axis("nodes", zero=False, integer=True), 0.0, 100.0).ticks
    assert all(t == int(t) for t in ticks) and ticks[0] <= lo and ticks[-1] >= hi and len(ticks) >= 2


def test_log_scale_ticks_are_1_2_5_decades() -> None:
    s = _Scale(3.0, 400.0, Axis("x", log=True), 0.0, 100.0)
    assert s.ticks == [5, 10, 20, 50, 100, 200]
    assert all(s(a) < s(b) for a, b in zip(s.ticks, s.ticks[1:], strict=False))
    assert 0.0 < s(3.0) < s(400.0) < 100.0


def test_user_strings_are_escaped_in_svg_and_legend() -> None:
    html = xy_chart("x", XSS, [Series(XSS, [Point(1, 1, XSS)])], Axis(XSS), Axis("y"), refs=[Ref("x", 1, XSS)])
    assert "<script>" not in html
    assert html.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 5
    _svg(html)


def test_grouped_bars_leave_gaps_for_missing_values() -> None:
    series = [BarSeries("on-demand", [Bar(10.0), Bar(20.0)]), BarSeries("spot", [Bar(4.0), Bar(None)])]
    html = bar_chart("bars", "Bars", ["a", "b"], series, Axis("USD"), refs=[Ref("y", 15, "budget")])
    root = _svg(html)
    bars = [e for e in root.iter() if "pt" in (e.get("class") or "").split()]
    assert len(bars) == 3
    heights = sorted(float(e.get("height", 0)) for e in bars)
    assert heights[0] < heights[1] < heights[2]  # 4 < 10 < 20 on a linear axis from 0
    assert heights[2] / heights[0] == pytest.approx(5.0, rel=0.02)


def test_stacked_bars_draw_one_segment_per_component() -> None:
    html = stacked_hbars("mem", "Memory", [("estimate", [("weights", 2.0), ("activations", 6.0), ("zero", 0.0)])],
                         {"weights": "#000"}, Axis("GiB"), refs=[Ref("x", 16, "T4 16 GiB")])  # fmt: skip
    root = _svg(html)
    segs = [e for e in root.iter() if "pt" in (e.get("class") or "").split()]
    assert [e.get("data-component") for e in segs] == ["weights", "activations"]
    w = [float(e.get("width", 0)) for e in segs]
    assert w[1] / w[0] == pytest.approx(3.0, rel=0.02)
    assert "T4 16 GiB" in html


def test_a_long_bar_label_wraps_inside_the_chart() -> None:
    """ "estimate on a CPU, load peak" ran off the chart's left edge ("te on a CPU, load peak" showed)."""
    html = stacked_hbars("mem", "Memory", [("estimate on a CPU, load peak", [("weights", 2.0)])], {}, Axis("GiB"))
    labels = [e for e in _svg(html).iter() if e.get("text-anchor") == "end"]
    assert ["".join(e.itertext()).replace("estimate on a CPU, load peak", "", 1) for e in labels] == [
        "estimate on a CPU,", "load peak"]  # the full label kept as each line's tooltip  # fmt: skip
    assert all(float(e.get("x", 0)) - 6.1 * len(list(e.itertext())[-1]) >= 0 for e in labels)


def test_a_budget_far_above_the_bars_is_named_instead_of_flattening_them() -> None:
    series = [BarSeries("spot", [Bar(0.5), Bar(1.0)])]
    html = bar_chart("b", "B", ["a", "b"], series, Axis("USD"), refs=[Ref("y", 80.0, "budget $80")])
    assert "Off the scale, far above the bars: budget $80." in html and 'data-ref="budget $80"' not in html
    near = bar_chart("b", "B", ["a", "b"], series, Axis("USD"), refs=[Ref("y", 2.0, "budget $2")])
    assert 'data-ref="budget $2"' in near and "Off the scale" not in near
