"""Parse and format quantities that users type: memory sizes like ``4GiB`` or ``512MB``; durations in hours."""

from __future__ import annotations

import math
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


_HOURS_PER = {"s": 1 / 3600, "min": 1 / 60, "h": 1.0}


def _unit(h: float) -> str:
    return "s" if 0 < abs(h) < 1 / 60 else "min" if abs(h) < 1 else "h"


def format_hours(h: float, unit: str | None = None) -> str:
    """A duration given in hours: seconds below one minute ('1 s': a 1-second deadline read '0.0167 min'), minutes
    below one hour ('2.4 min', '30 min'), else hours ('12.3 h'), three significant digits, so a 3-minute job does
    not read '0.0 h'; ``unit`` ("s", "min", "h") to write it in one unit with another duration."""
    unit = unit or _unit(h)
    value = h / _HOURS_PER[unit]
    text = f"{value:,.0f}" if value != 0 and abs(value) >= 100 else f"{value:.3g}"
    return f"{text} {unit}"


def format_hours_apart(a: float, b: float) -> tuple[str, str]:
    """``format_hours`` of both, with digits added until two different durations read differently ("10.02 h > 10
    h", not "10 h > 10 h"); under an hour, both in seconds when either is under a minute ("155 s > 1 s", not
    "2.58 min > 1 s")."""
    unit = "s" if "s" in (_unit(a), _unit(b)) and max(abs(a), abs(b)) < 1 else None
    for digits in range(3, 8):
        texts = tuple(_hours(h, digits, unit) for h in (a, b))
        if a == b or texts[0] != texts[1]:
            return texts[0], texts[1]
    return texts[0], texts[1]


def _hours(h: float, digits: int, unit: str | None) -> str:
    if digits == 3:
        return format_hours(h, unit)
    unit = unit or _unit(h)
    return f"{h / _HOURS_PER[unit]:,.{digits}g} {unit}"


def format_usd(value: float, sign: bool = True) -> str:
    """Dollars to the cent, or two significant digits under $0.10 (a 2-vCPU instance's $0.085/h is not $0.08/h):
    $0.0042, $0.085, $1.23, $1,234; ``sign=False`` for a table column that names the unit ("0.085")."""
    cur = "$" if sign else ""
    if abs(value) >= 100:
        return f"{cur}{value:,.0f}"
    if abs(value) >= 0.1 or value == 0:
        return f"{cur}{value:,.2f}"
    return f"{cur}{value:.2g}"


def format_usd_apart(a: float, b: float) -> tuple[str, str]:
    """``format_usd`` of both, with digits added until two different amounts read differently ("$0.10 > $0.0001",
    "$2.005 > $2.000", not "$0.10 > $0.00" or "$2.00 > $2.00")."""
    texts = format_usd(a), format_usd(b)
    for digits in range(3, 8):
        if a == b or texts[0] != texts[1]:
            break
        texts = f"${a:,.{digits}f}", f"${b:,.{digits}f}"
    return texts


def format_share(value: float) -> str:
    """A share in whole percent; one decimal between 99% and 100%, never "100%" below 1 (a replica 99.57% busy had
    read "100%" beside a headroom of 0.8)."""
    return f"{min(value * 100, 99.9):.1f}%" if 0.99 < value < 1.0 else f"{value * 100:.0f}%"


def ceil_hours(h: float) -> float:
    """``h`` rounded up to three significant digits (a deadline the spec can hold that is not short of ``h``)."""
    if h <= 0:
        return 0.0
    step = 10.0 ** (math.floor(math.log10(h)) - 2)
    return float(f"{math.ceil(h / step - 1e-9) * step:.3g}")


def ceil_usd(usd: float) -> float:
    """``usd`` rounded up to what format_usd prints ($0.103 -> $0.11, not a $0.10 that would not buy it)."""
    if usd <= 0:
        return 0.0
    step = 1.0 if usd >= 100 else 0.01 if usd >= 0.1 else 10.0 ** (math.floor(math.log10(usd)) - 1)
    return math.ceil(usd / step - 1e-9) * step
