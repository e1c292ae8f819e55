"""Parse and format quantities that users type: memory sizes like ``4GiB`` or ``512MB``; durations in hours."""

from __future__ import annotations

import re

from rightsize.errors import SpecError

_UNITS = {
    "": 1, "b": 1,
    "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3, "t": 1000**4, "tb": 1000**4,
    "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4,
}  # fmt: skip


def parse_bytes(text: str, field: str = "memory") -> int:
    """``"4GiB"`` -> 4294967296; decimal (GB) and binary (GiB) units, case-insensitive."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", text)
    if not m or m.group(2).lower() not in _UNITS:
        raise SpecError(field, f"must be a size such as 4GiB, 512MiB or 2GB, got {text!r}")
    value = float(m.group(1)) * _UNITS[m.group(2).lower()]
    if value < 1:
        raise SpecError(field, f"must be at least 1 byte, got {text!r}")
    return int(value)


def format_bytes(n: float | None) -> str:
    """Human-readable binary size: 1536 -> '1.5 KiB'; None -> '-'."""
    if n is None:
        return "-"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def format_hours(h: float) -> str:
    """A duration given in hours: minutes below one hour ('2.4 min', '30 min'), else hours ('12.3 h'),
    three significant digits, so a 3-minute job does not read '0.0 h'."""
    value, unit = (h * 60.0, "min") if abs(h) < 1 else (h, "h")
    text = f"{value:,.0f}" if value != 0 and abs(value) >= 100 else f"{value:.3g}"
    return f"{text} {unit}"


def format_hours_apart(a: float, b: float) -> tuple[str, str]:
    """``format_hours`` of both, with digits added until two different durations read differently ("10.02 h > 10
    h", not "10 h > 10 h")."""
    for digits in range(3, 8):
        texts = tuple(_hours(h, digits) for h in (a, b))
        if a == b or texts[0] != texts[1]:
            return texts[0], texts[1]
    return texts[0], texts[1]


def _hours(h: float, digits: int) -> str:
    value, unit = (h * 60.0, "min") if abs(h) < 1 else (h, "h")
    if digits == 3:
        return format_hours(h)
    return f"{value:,.{digits}g} {unit}"


def format_usd(value: float, sign: bool = True) -> str:
    """Dollars to the cent, or two significant digits under $0.10 (a 2-vCPU instance's $0.085/h is not $0.08/h):
    $0.0042, $0.085, $1.23, $1,234; ``sign=False`` for a table column that names the unit ("0.085")."""
    cur = "$" if sign else ""
    if abs(value) >= 100:
        return f"{cur}{value:,.0f}"
    if abs(value) >= 0.1 or value == 0:
        return f"{cur}{value:,.2f}"
    return f"{cur}{value:.2g}"
