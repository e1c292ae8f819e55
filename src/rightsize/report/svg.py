"""A small inline-SVG chart kit: scatter/line charts with bands and reference lines (bars: ``svg_bars``).

No JavaScript and no external files, so a report works offline and in any browser. Each chart is a
``<figure data-chart="NAME">``; each data mark (circle, square, diamond, bar) carries ``class="pt"`` and
a ``<title>`` tooltip, so a browser test counts ``[data-chart=NAME] .pt``. A chart with nothing to
draw becomes ``<figure data-chart-skipped="NAME">`` with the reason.

Coordinates: data (x, y) -> pixels in a ``width`` x ``height`` viewBox; plot area inside ``_MARGIN``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from rightsize.report.fmt import esc, finite

__all__ = ["PALETTE", "REF_COLORS", "Axis", "Marker", "Point", "Ref", "Series", "skipped", "xy_chart"]

# Okabe-Ito colour-blind-safe palette (yellow dropped: unreadable on white), then two greys.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#555555", "#8C564B")
REF_COLORS = {"slo": "#C0392B", "budget": "#B8860B", "deadline": "#6A1B9A", "rate": "#555555", "tier": "#7F8C8D"}

Marker = Literal["circle", "square", "diamond"]

_W, _H = 600, 340
_MARGIN = (62, 18, 22, 46)  # left, right, top, bottom (pixels)


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    tip: str = ""  # tooltip text (escaped on output)
    attrs: Mapping[str, str] = field(default_factory=dict)  # extra data-* attributes (dashboard filters)


@dataclass(frozen=True)
class Series:
    name: str
    points: Sequence[Point]
    color: str = PALETTE[0]
    line: bool = True  # join the points (sorted by x)
    dashed: bool = False  # projected curves
    hollow: bool = False  # projected points
    marker: Marker = "circle"
    band: Sequence[tuple[float, float, float]] = ()  # (x, y_lo, y_hi): the uncertainty band
    highlight: bool = False  # the recommendation: bigger marks
    legend: bool = True


@dataclass(frozen=True)
class Ref:
    """A reference line across the plot: the SLO, a budget, a deadline, a GPU memory tier."""

    axis: Literal["x", "y"]
    value: float
    label: str
    color: str = REF_COLORS["slo"]


@dataclass(frozen=True)
class Axis:
    label: str
    log: bool = False
    zero: bool = True  # linear axes start at 0 when the data is positive
    integer: bool = False  # a count (nodes, instances): whole-number ticks only (it had ticked 1.2, 1.4 nodes)


# -- scales ---------------------------------------------------------------------------------------


def _nice_step(span: float, n: int = 5) -> float:
    raw = span / max(n, 1)
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


class _Scale:
    """Data -> pixels on one axis, with its tick values."""

    def __init__(self, lo: float, hi: float, axis: Axis, px0: float, px1: float) -> None:
        self.log, self.px0, self.px1 = axis.log, px0, px1
        if self.log:
            lo, hi = max(lo, 1e-12), max(hi, 1e-12)
            if hi / lo < 1.5:
                lo, hi = lo / 1.5, hi * 1.5
            self.lo, self.hi = lo / 1.15, hi * 1.15
            self._ticks = self._log_ticks()
        else:
            if axis.zero and lo > 0:
                lo = 0.0
            if hi - lo <= 0:
                whole = lo == 0 or axis.integer
                lo, hi = (lo - 1, hi + 1) if whole else (lo - abs(lo) * 0.5, hi + abs(hi) * 0.5)
            step = _nice_step(hi - lo)
            if axis.integer:
                step = float(max(1, math.ceil(step)))
            self.lo, self.hi = math.floor(lo / step) * step, math.ceil(hi / step) * step
            if self.hi - self.lo <= 0:
                self.hi = self.lo + step
            n = round((self.hi - self.lo) / step)
            self._ticks = [self.lo + i * step for i in range(n + 1)]

    def _log_ticks(self) -> list[float]:
        decades = range(math.floor(math.log10(self.lo)), math.ceil(math.log10(self.hi)) + 1)
        ticks = [m * 10.0**k for k in decades for m in (1, 2, 5) if self.lo <= m * 10.0**k <= self.hi]
        if len(ticks) < 3:  # a narrow range: every integer multiple of the decade
            ticks = [m * 10.0**k for k in decades for m in range(1, 10) if self.lo <= m * 10.0**k <= self.hi]
        if len(ticks) > 8:
            ticks = [t for t in ticks if round(t / 10 ** math.floor(math.log10(t)), 6) == 1] or ticks
        return ticks

    def __call__(self, v: float) -> float:
        if self.log:
            f = (math.log10(max(v, 1e-12)) - math.log10(self.lo)) / (math.log10(self.hi) - math.log10(self.lo))
        else:
            f = (v - self.lo) / (self.hi - self.lo)
        return self.px0 + f * (self.px1 - self.px0)

    @property
    def ticks(self) -> list[float]:
        return self._ticks


def _tick(v: float) -> str:
    a = abs(v)
    if a >= 1e6:
        return f"{v / 1e6:g}M"
    if a >= 1e3:
        return f"{v / 1e3:g}k"
    if a == 0 or a >= 0.01:
        return f"{round(v, 4):g}"
    return f"{v:.0e}"


def _f(v: float) -> str:
    return f"{v:.1f}"


# -- building blocks ------------------------------------------------------------------------------


def _figure(name: str, title: str, svg: str, legend: str, note: str) -> str:
    note_html = f'<p class="note">{esc(note)}</p>' if note else ""
    return (
        f'<figure class="chart" data-chart="{esc(name)}"><figcaption>{esc(title)}</figcaption>'
        f"{svg}{legend}{note_html}</figure>"
    )


def skipped(name: str, title: str, reason: str) -> str:
    """The placeholder for a chart that has no data here, saying why."""
    return (
        f'<figure class="chart skipped" data-chart-skipped="{esc(name)}"><figcaption>{esc(title)}</figcaption>'
        f'<p class="note">Not shown: {esc(reason)}</p></figure>'
    )


def _legend(items: Sequence[tuple[str, str, str]] | Sequence[tuple[str, str, str, str]]) -> str:
    """items: (name, colour, style[, marker]) with style '' | 'hollow' | 'dashed' and the series' marker shape,
    so the key shows the glyph the plot draws (p50 circles and p95 squares must not look alike)."""
    if not items:
        return ""
    lis = "".join(
        f'<li><span class="sw {esc(item[2])} {esc(item[3] if len(item) > 3 else "circle")}" '
        f'style="--c:{esc(item[1])}"></span>{esc(item[0])}</li>'
        for item in items
    )
    return f'<ul class="legend">{lis}</ul>'


def _attrs(attrs: Mapping[str, str]) -> str:
    return "".join(f' data-{esc(k)}="{esc(v)}"' for k, v in attrs.items())


def _mark(s: Series, cx: float, cy: float, p: Point) -> str:
    r = 6.5 if s.highlight else 4.0
    fill = "#fff" if s.hollow else s.color
    width = 2.5 if s.highlight else 1.5
    style = f'fill="{esc(fill)}" stroke="{esc(s.color)}" stroke-width="{width}"'
    tip = f"<title>{esc(p.tip or s.name)}</title>"
    extra = _attrs(p.attrs)
    if s.marker == "square":
        box = f'x="{_f(cx - r)}" y="{_f(cy - r)}" width="{_f(2 * r)}" height="{_f(2 * r)}"'
        return f'<rect class="pt"{extra} {box} {style}>{tip}</rect>'
    if s.marker == "diamond":
        d = r * 1.3
        pts = f"{_f(cx)},{_f(cy - d)} {_f(cx + d)},{_f(cy)} {_f(cx)},{_f(cy + d)} {_f(cx - d)},{_f(cy)}"
        return f'<polygon class="pt"{extra} points="{pts}" {style}>{tip}</polygon>'
    return f'<circle class="pt"{extra} cx="{_f(cx)}" cy="{_f(cy)}" r="{r}" {style}>{tip}</circle>'


def _axes(xs: _Scale, ys: _Scale, x: Axis, y: Axis, w: float, h: float) -> list[str]:
    left, right, top, bottom = _MARGIN
    out = [f'<rect class="plot" x="{left}" y="{top}" width="{_f(w - left - right)}" height="{_f(h - top - bottom)}"/>']
    for t in xs.ticks:
        px = xs(t)
        out.append(f'<line class="grid" x1="{_f(px)}" y1="{top}" x2="{_f(px)}" y2="{_f(h - bottom)}"/>')
        out.append(
            f'<text class="tick" x="{_f(px)}" y="{_f(h - bottom + 14)}" text-anchor="middle">{esc(_tick(t))}</text>'
        )
    for t in ys.ticks:
        py = ys(t)
        out.append(f'<line class="grid" x1="{left}" y1="{_f(py)}" x2="{_f(w - right)}" y2="{_f(py)}"/>')
        out.append(f'<text class="tick" x="{left - 6}" y="{_f(py + 4)}" text-anchor="end">{esc(_tick(t))}</text>')
    out.append(
        f'<text class="axis" x="{_f((left + w - right) / 2)}" y="{_f(h - 8)}" '
        f'text-anchor="middle">{esc(x.label)}</text>'
    )
    out.append(
        f'<text class="axis" transform="translate(14 {_f((top + h - bottom) / 2)}) rotate(-90)" '
        f'text-anchor="middle">{esc(y.label)}</text>'
    )
    return out


def _ref(r: Ref, xs: _Scale, ys: _Scale, w: float, h: float, slot: int) -> str:
    left, right, top, bottom = _MARGIN
    style = f'stroke="{esc(r.color)}"'
    label = f'<text class="ref-label" fill="{esc(r.color)}"'
    if r.axis == "x":
        px = xs(r.value)
        anchor = "end" if px > (left + w - right) / 2 else "start"
        dx = -4 if anchor == "end" else 4
        return (
            f'<g class="ref" data-ref="{esc(r.label)}">'
            f'<line x1="{_f(px)}" y1="{top}" x2="{_f(px)}" y2="{_f(h - bottom)}" {style}/>'
            f'{label} x="{_f(px + dx)}" y="{top + 12 + 12 * slot}" text-anchor="{anchor}">{esc(r.label)}</text></g>'
        )
    py = ys(r.value)
    return (
        f'<g class="ref" data-ref="{esc(r.label)}">'
        f'<line x1="{left}" y1="{_f(py)}" x2="{_f(w - right)}" y2="{_f(py)}" {style}/>'
        f'{label} x="{_f(w - right - 4)}" y="{_f(py - 4 - 12 * slot)}" text-anchor="end">{esc(r.label)}</text></g>'
    )


def _usable(v: float | None, log: bool) -> bool:
    return v is not None and (not log or v > 0)


# -- charts ---------------------------------------------------------------------------------------


Drawn = tuple[Series, list[Point], list[tuple[float, float, float]]]


def _merge_twins(clean: list[Drawn]) -> list[Drawn]:
    """Series that draw exactly the same marks and line share one legend entry, named for each ("A = B"): two
    instances one projection serves alike (a T4 on AWS and on Azure; two clusters of one GPU) had drawn the second
    exactly over the first, a legend entry with nothing of its own to see. Each is still drawn (its marks keep their
    own tooltips)."""
    out: list[Drawn] = []
    seen: dict[tuple[Any, ...], int] = {}
    for s, pts, band in clean:
        key = (tuple((p.x, p.y) for p in pts), tuple(band), s.line, s.dashed, s.hollow, s.marker)
        if pts and s.legend and key in seen:
            i = seen[key]
            out[i] = (replace(out[i][0], name=f"{out[i][0].name} = {s.name}"), *out[i][1:])
            # in the legend's colour: drawn over the first in its own, it had hidden the colour the legend names
            out.append((replace(s, legend=False, color=out[i][0].color), pts, band))
            continue
        if s.legend:
            seen[key] = len(out)
        out.append((s, pts, band))
    return out


def xy_chart(
    name: str,
    title: str,
    series: Sequence[Series],
    x: Axis,
    y: Axis,
    *,
    refs: Sequence[Ref] = (),
    note: str = "",
    empty: str = "no data points",
    width: int = _W,
    height: int = _H,
) -> str:
    """A scatter/line chart; series points off a log axis (<= 0) or non-finite are dropped."""
    clean: list[tuple[Series, list[Point], list[tuple[float, float, float]]]] = []
    for s in series:
        pts = [p for p in s.points if _usable(finite(p.x), x.log) and _usable(finite(p.y), y.log)]
        band = [b for b in s.band if _usable(finite(b[0]), x.log) and all(_usable(finite(v), y.log) for v in b[1:])]
        if pts or band:
            clean.append((s, sorted(pts, key=lambda p: p.x) if s.line else pts, band))
    if not any(pts for _, pts, _ in clean):
        return skipped(name, title, empty)
    clean = _merge_twins(clean)
    xs_all = [p.x for _, pts, _ in clean for p in pts] + [b[0] for _, _, band in clean for b in band]
    ys_all = [p.y for _, pts, _ in clean for p in pts] + [v for _, _, band in clean for b in band for v in b[1:]]
    refs = [r for r in refs if _usable(finite(r.value), (x if r.axis == "x" else y).log)]
    xs_all += [r.value for r in refs if r.axis == "x"]
    ys_all += [r.value for r in refs if r.axis == "y"]
    left, right, top, bottom = _MARGIN
    xs = _Scale(min(xs_all), max(xs_all), x, left, width - right)
    ys = _Scale(min(ys_all), max(ys_all), y, height - bottom, top)
    out = [f'<svg class="plot-svg" viewBox="0 0 {width} {height}" role="img" aria-label="{esc(title)}">']
    out += _axes(xs, ys, x, y, width, height)
    for s, _, band in clean:
        if band:
            b = sorted(band)
            poly = [f"{_f(xs(bx))},{_f(ys(hi))}" for bx, _, hi in b] + [
                f"{_f(xs(bx))},{_f(ys(lo))}" for bx, lo, _ in reversed(b)
            ]
            out.append(f'<polygon class="band" points="{" ".join(poly)}" fill="{esc(s.color)}"/>')
    on_top = sorted(clean, key=lambda c: c[0].highlight)  # the recommendation last: never hidden under a twin
    for s, pts, _ in on_top:
        if s.line and len(pts) > 1:
            dash = ' stroke-dasharray="6 4"' if s.dashed else ""
            thick = ' stroke-width="3.5" data-highlight="1"' if s.highlight else ""
            line = " ".join(f"{_f(xs(p.x))},{_f(ys(p.y))}" for p in pts)
            out.append(f'<polyline class="series" points="{line}" stroke="{esc(s.color)}"{dash}{thick}/>')
    slots = {"x": 0, "y": 0}
    for r in refs:
        out.append(_ref(r, xs, ys, width, height, slots[r.axis]))
        slots[r.axis] += 1
    for s, pts, _ in on_top:
        out.extend(_mark(s, xs(p.x), ys(p.y), p) for p in pts)
    out.append("</svg>")
    legend = [
        (s.name, s.color, "hollow" if s.hollow else "dashed" if s.dashed else "", s.marker)
        for s, _, _ in clean
        if s.legend
    ]
    return _figure(name, title, "".join(out), _legend(legend), note)
