"""Sources the product cites are in the product: docs/sources.md, with a link and a date for every key."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT / "docs" / "sources.md"
SHIPPED = [*ROOT.glob("src/**/*.py"), *ROOT.glob("src/**/*.csv"), *ROOT.glob("docs/*.md"), *ROOT.glob("examples/*"),
           ROOT / "README.md"]  # fmt: skip
CITING = [*SHIPPED, *(p for p in ROOT.glob("tests/**/*.py") if p.resolve() != Path(__file__).resolve())]

KEY = r"[a-z0-9]+(?:-[a-z0-9]+)*"
# data files: "sources: a" or "sources: a, b"
DATA_PATTERN = re.compile(rf"sources: ({KEY}(?:, {KEY})*)")
# code and docs: docs/sources.md `a` / [docs/sources.md](...) `a`, `b` / sources.md a-b
TEXT_PATTERN = re.compile(
    rf"sources\.md(?:\]\([^)]*\))?\)? (`{KEY}`(?:(?:, | and | or )`{KEY}`)*)|sources\.md ({KEY}-{KEY})"
)
OUTSIDE = re.compile(r"REFERENCE\.md|REFERENCE §|shared/REFERENCE")


def _entries() -> dict[str, str]:
    """key -> its table row in docs/sources.md."""
    out = {}
    for line in SOURCES.read_text(encoding="utf-8").splitlines():
        m = re.match(rf"\| `({KEY})` \|(.*)", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def keys_in(text: str, data: bool) -> list[str]:
    """Every key a text cites (``data``: a catalog CSV's ``sources: a, b``; else code or docs)."""
    out: list[str] = []
    for m in (DATA_PATTERN if data else TEXT_PATTERN).finditer(text):
        cited = next(g for g in m.groups() if g)
        out += [k.strip("`") for k in re.split(r", | and | or ", cited)]
    return out


def _cited() -> dict[str, set[str]]:
    """key -> files citing it."""
    out: dict[str, set[str]] = {}
    for path in CITING:
        if path.is_file() and path != SOURCES:
            for key in keys_in(path.read_text(encoding="utf-8", errors="replace"), data=path.suffix == ".csv"):
                out.setdefault(key, set()).add(str(path.relative_to(ROOT)))
    return out


def test_nothing_cites_a_file_outside_the_repo() -> None:
    offenders = [
        str(p.relative_to(ROOT)) for p in CITING if p.is_file() and OUTSIDE.search(p.read_text(errors="replace"))
    ]
    assert offenders == []


def test_every_cited_key_is_listed() -> None:
    entries, cited = _entries(), _cited()
    assert len(cited) >= 15  # the catalog rows and the code cite sources
    missing = {k: sorted(v) for k, v in cited.items() if k not in entries}
    assert missing == {}


def test_the_check_sees_every_key_of_a_citation() -> None:
    """A made-up key is caught wherever it sits in a citation, so a typo cannot slip through."""
    entries = _entries()
    assert keys_in('x,"NVIDIA (sources: nvidia-h200, no-such-key); measured",2025-06', data=True) == [
        "nvidia-h200",
        "no-such-key",
    ]
    assert keys_in("Kingman (docs/sources.md `young-daly`, `no-such-key`)", data=False) == ["young-daly", "no-such-key"]
    assert keys_in("see docs/sources.md no-such-key.", data=False) == ["no-such-key"]
    assert "no-such-key" not in entries
    assert {"skypilot-catalog", "aws-ec2-pricing", "gcp-vm-pricing", "azure-vm-pricing", "h200-measured"} <= set(
        _cited()
    )


def test_every_entry_has_a_link_and_a_date() -> None:
    entries = _entries()
    assert len(entries) >= 20
    for key, row in entries.items():
        assert re.search(r"https?://|doi:|arXiv:|measured by this project", row), key
        assert re.search(r"\b(19|20)\d\d\b", row), key
