"""Bar charts for the report: grouped vertical bars (spot vs on-demand) and stacked horizontal bars (memory).

Same conventions as ``rightsize.report.svg``: a ``<figure data-chart=NAME>``, every bar a ``class="pt"``
rect with a ``<title>`` tooltip, and a skipped placeholder when there is nothing to draw.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rightsize.report.fmt import esc, finite
from rightsize.report.svg import _H, _MARGIN, _W, PALETTE, Axis, Ref, _f, _figure, _legend, _ref, _Scale, _tick, skipped

__all__ = ["Bar", "BarSeries", "bar_chart", "stacked_hbars"]

OFF_SCALE = 4.0  # a reference line above this multiple of the tallest bar is named in the note instead


@dataclass(frozen=True)
class Bar:
    value: float | None
    tip: str = ""


@dataclass(frozen=True)
class BarSeries:
    name: str
    bars: Sequence[Bar]  # one per category
    color: str = PALETTE[0]


def bar_chart(
    name: str,
    title: str,
    categories: Sequence[str],
    series: Sequence[BarSeries],
    y: Axis,
    *,
    refs: Sequence[Ref] = (),
    note: str = "",
    empty: str = "no data",
    width: int = _W,
    height: int = _H,
) -> str:
    """Grouped vertical bars: one group per category, one bar per series (missing values leave a gap)."""
    vals = [finite(b.value) for s in series for b in s.bars]
    present = [v for v in vals if v is not None]
    if not categories or not present:
        return skipped(name, title, empty)
    left, right, top, bottom = _MARGIN
    # A line far above the bars would flatten them: keep it only within OFF_SCALE x the tallest bar.
    shown = [r for r in refs if r.axis == "y" and r.value <= OFF_SCALE * max(present)]
    off = [r.label for r in refs if r.axis == "y" and r not in shown]
    if off:
        note = (note + " " if note else "") + f"Off the scale, far above the bars: {', '.join(off)}."
    ys = _Scale(min([0.0, *present]), max(present + [r.value for r in shown]), y, height - bottom, top)
    xs = _Scale(0, len(categories), Axis("", zero=False), left, width - right)
    out = [f'<svg class="plot-svg" viewBox="0 0 {width} {height}" role="img" aria-label="{esc(title)}">']
    out.append(
        f'<rect class="plot" x="{left}" y="{top}" width="{width - left - right}" height="{height - top - bottom}"/>'
    )
    for t in ys.ticks:
        out.append(f'<line class="grid" x1="{left}" y1="{_f(ys(t))}" x2="{width - right}" y2="{_f(ys(t))}"/>')
        out.append(f'<text class="tick" x="{left - 6}" y="{_f(ys(t) + 4)}" text-anchor="end">{esc(_tick(t))}</text>')
    group_w = (width - left - right) / len(categories)
    bar_w = min(group_w * 0.8 / max(len(series), 1), 56.0)
    fit = max(int(group_w / 6.2), 4)  # characters of an 11 px label that fit under a group
    for i, cat in enumerate(categories):
        gx = left + i * group_w + (group_w - bar_w * len(series)) / 2  # the group is centred in its slot
        short = cat if len(cat) <= fit else cat[: fit - 1] + "…"
        out.append(
            f'<text class="tick" x="{_f(left + (i + 0.5) * group_w)}" y="{height - bottom + 14}" '
            f'text-anchor="middle">{esc(short)}<title>{esc(cat)}</title></text>'
        )
        for j, s in enumerate(series):
            v = finite(s.bars[i].value) if i < len(s.bars) else None
            if v is None:
                continue
            y0, y1 = ys(0.0), ys(v)
            out.append(
                f'<rect class="pt bar" x="{_f(gx + j * bar_w)}" y="{_f(min(y0, y1))}" width="{_f(bar_w - 2)}" '
                f'height="{_f(max(abs(y0 - y1), 1.0))}" fill="{esc(s.color)}">'
                f"<title>{esc(s.bars[i].tip or s.name)}</title></rect>"
            )
    for k, r in enumerate(shown):
        out.append(_ref(r, xs, ys, width, height, k))
    out.append(
        f'<text class="axis" transform="translate(14 {_f((top + height - bottom) / 2)}) rotate(-90)" '
        f'text-anchor="middle">{esc(y.label)}</text></svg>'
    )
    return _figure(name, title, "".join(out), _legend([(s.name, s.color, "") for s in series]), note)


LABEL_CHARS = 20  # of an 11 px label, what the 130 px left of the bars holds


def _label_lines(label: str, chars: int = LABEL_CHARS) -> list[str]:
    """A bar's label in at most two lines of ``chars``, broken at a space, the rest elided: "estimate on a CPU, load
    peak" had run off the chart's left edge as "te on a CPU, load peak"."""
    if len(label) <= chars:
        return [label]
    cut = label.rfind(" ", 0, chars + 1)
    cut = cut if cut > 0 else chars
    first, rest = label[:cut].rstrip(), label[cut:].strip()
    return [first, rest if len(rest) <= chars else rest[: chars - 1].rstrip() + "…"]


def stacked_hbars(
    name: str,
    title: str,
    bars: Sequence[tuple[str, Sequence[tuple[str, float]]]],
    colors: Mapping[str, str],
    x: Axis,
    *,
    refs: Sequence[Ref] = (),
    note: str = "",
    empty: str = "no data",
    width: int = _W,
) -> str:
    """Horizontal stacked bars (label, [(component, value)]) with vertical reference lines (e.g. GPU tiers)."""
    rows = [(label, [(c, v) for c, v in parts if (finite(v) or 0) > 0]) for label, parts in bars]
    rows = [r for r in rows if r[1]]
    if not rows:
        return skipped(name, title, empty)
    left, right, top, bottom = 130, 18, 22 + 12 * min(len(refs), 4), 46
    height = top + bottom + 34 * len(rows) + 10
    totals = [sum(v for _, v in parts) for _, parts in rows]
    xs = _Scale(0.0, max(totals + [r.value for r in refs]), x, left, width - right)
    out = [f'<svg class="plot-svg" viewBox="0 0 {width} {height}" role="img" aria-label="{esc(title)}">']
    out.append(
        f'<rect class="plot" x="{left}" y="{top}" width="{width - left - right}" height="{height - top - bottom}"/>'
    )
    for t in xs.ticks:
        out.append(f'<line class="grid" x1="{_f(xs(t))}" y1="{top}" x2="{_f(xs(t))}" y2="{height - bottom}"/>')
        out.append(
            f'<text class="tick" x="{_f(xs(t))}" y="{height - bottom + 14}" text-anchor="middle">{esc(_tick(t))}</text>'
        )
    for i, (label, parts) in enumerate(rows):
        y, acc = top + 8 + 34 * i, 0.0
        lines = _label_lines(label)
        for j, line in enumerate(lines):  # one line at the bar's middle, two around it
            ty = y + (16 if len(lines) == 1 else 10 + 12 * j)
            out.append(f'<text class="tick" x="{left - 6}" y="{ty}" text-anchor="end"><title>{esc(label)}</title>'
                       f"{esc(line)}</text>")  # fmt: skip
        for comp, v in parts:
            x0, x1 = xs(acc), xs(acc + v)
            out.append(
                f'<rect class="pt bar" data-component="{esc(comp)}" x="{_f(x0)}" y="{y}" '
                f'width="{_f(max(x1 - x0, 1.0))}" '
                f'height="24" fill="{esc(colors.get(comp, PALETTE[6]))}">'
                f"<title>{esc(comp)}: {v:.3g} {esc(x.label)}</title></rect>"
            )
            acc += v
    for k, r in enumerate(refs):
        px = xs(r.value)
        out.append(
            f'<g class="ref" data-ref="{esc(r.label)}"><line x1="{_f(px)}" y1="{top - 12 * (k % 4) - 4}" x2="{_f(px)}" '
            f'y2="{height - bottom}" stroke="{esc(r.color)}"/>'
            f'<text class="ref-label" fill="{esc(r.color)}" x="{_f(px + 3)}" '
            f'y="{top - 12 * (k % 4) - 6}">{esc(r.label)}</text></g>'
        )
    out.append(
        f'<text class="axis" x="{_f((left + width - right) / 2)}" y="{height - 8}" '
        f'text-anchor="middle">{esc(x.label)}</text>'
    )
    out.append("</svg>")
    comps = list(dict.fromkeys(c for _, parts in rows for c, _ in parts))
    return _figure(name, title, "".join(out), _legend([(c, colors.get(c, PALETTE[6]), "") for c in comps]), note)
