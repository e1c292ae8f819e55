"""Formatting and escaping shared by the HTML report, the Markdown report and the dashboard.

Every user-supplied string (model, workload, instance, reasons) goes through ``esc`` (HTML/SVG) or
``md`` (Markdown) before it reaches a page; numbers go through the unit formatters below.
"""

from __future__ import annotations

import html
import math
import re
from typing import TYPE_CHECKING, Any

from rightsize.units import format_bytes, format_hours, format_share, format_usd

if TYPE_CHECKING:
    from rightsize.profile import Measurement

__all__ = ["esc", "finite", "format_bytes", "hours", "md", "ms", "num", "pct", "quality_word", "usd"]


def esc(value: object) -> str:
    """HTML-escape any value's text (quotes too, so it is safe inside attributes)."""
    return html.escape("" if value is None else str(value), quote=True)


_MD_SPECIAL = str.maketrans({c: "\\" + c for c in "\\`*_[]|<>#"})
# A code span: a run of backticks, then text, then a run of the same length (CommonMark). Its text is shown as
# written (a backslash there is literal, and the renderer escapes ``<``), so only its pipes are escaped: a GFM
# table splits cells on ``|`` even inside code spans, and ``\|`` keeps the cell whole.
_MD_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)


def md(value: object) -> str:
    """Escape text for a Markdown table cell or paragraph (GitHub renders raw HTML, so ``<`` too).

    Code spans (`` `rightsize validate` ``) are kept: the text means code, so their backticks are not escaped
    and their content is left as is, but for ``|`` (tables). A lone backtick is escaped."""
    text = "" if value is None else str(value)
    out: list[str] = []
    pos = 0
    for m in _MD_CODE_SPAN.finditer(text):
        out.append(text[pos : m.start()].translate(_MD_SPECIAL))
        out.append(m.group(1) + m.group(2).replace("|", "\\|") + m.group(1))
        pos = m.end()
    out.append(text[pos:].translate(_MD_SPECIAL))
    return "".join(out).replace("\n", " ")


def finite(value: Any) -> float | None:
    """``value`` as a float when it is a finite number, else None (JSON nulls, NaN, inf, text)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    f = float(value)
    return f if math.isfinite(f) else None


def num(value: Any, digits: int = 3, zeros: bool = False) -> str:
    """A number with ``digits`` significant digits, thousands separators for big ones; '-' for none. ``zeros``
    keeps trailing zeros, for figures read side by side ("16.3 / 25.0 / 30.3 ms", not "16.3 / 25 / 30.3")."""
    f = finite(value)
    if f is None:
        return "-"
    if f != 0 and abs(f) >= 10 ** (digits - 1):
        return f"{f:,.0f}"
    return f"{f:#.{digits}g}".rstrip(".") if zeros else f"{f:.{digits}g}"  # 99.95 rounds to "100.": no point


def usd(value: Any, sign: bool = True) -> str:
    """Dollars (``units.format_usd``): $0.0042, $1.23, $1,234; "-" for a missing or non-finite value."""
    f = finite(value)
    return "-" if f is None else format_usd(f, sign)


def ms(value: Any) -> str:
    f = finite(value)
    return "-" if f is None else f"{num(f)} ms"


def hours(value: Any) -> str:
    """Hours, or minutes below one hour (units.format_hours); '-' for none."""
    f = finite(value)
    return "-" if f is None else format_hours(f)


def checkpoint_every(spot: dict[str, Any], runtime_hours: Any) -> str:
    """A spot plan's Young/Daly interval in minutes, or "none needed" when it is longer than the job itself (a
    15-minute job had read "checkpoint every 1,859 min"; ``plan.explain`` says the same in its warning)."""
    every, run = finite(spot.get("checkpoint_interval_min")), finite(spot.get("work_hours") or runtime_hours)
    if every is not None and every <= 0:  # checkpoint_minutes 0: free, so at every step
        return "every step (free)"
    if every is not None and run is not None and every >= 60.0 * run:
        return "none needed (longer than the job)"
    return f"{num(every)} min"


def pct(value: Any) -> str:
    """``units.format_share``; '-' for none."""
    f = finite(value)
    return "-" if f is None else format_share(f)


def quality_word(m: Measurement) -> str:
    """How far one measured point can be trusted, in a table cell: "contended, ~2.7x slow" (other work held the CPU:
    rightsize.measure.quality), "not converged" (its median's interval missed the target), or "" when clean."""
    from rightsize.measure.quality import is_contended, slowdown

    if is_contended(m):
        return f"contended, ~{slowdown(m):.1f}x slow"
    return "not converged" if m.extra.get("ci_converged") is False else ""
