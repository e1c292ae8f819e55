"""Sources the product cites are in the product: docs/sources.md, with a link and a date for every key."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT / "docs" / "sources.md"
SHIPPED = [*ROOT.glob("src/**/*.py"), *ROOT.glob("src/**/*.csv"), *ROOT.glob("docs/*.md"), *ROOT.glob("examples/*"),
           ROOT / "README.md"]  # fmt: skip


def _entries() -> dict[str, str]:
    """key -> its table row in docs/sources.md."""
    out = {}
    for line in SOURCES.read_text(encoding="utf-8").splitlines():
        m = re.match(r"\| `([a-z0-9-]+)` \|(.*)", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def _cited() -> dict[str, set[str]]:
    """key -> files citing it (``sources: key`` in data, docs/sources.md `key` / sources.md key in text)."""
    out: dict[str, set[str]] = {}
    text_pattern = re.compile(r"sources\.md\)? `([a-z0-9-]+)`|sources\.md ([a-z0-9]+-[a-z0-9-]+)")
    data_pattern = re.compile(r"sources: ([a-z0-9-]+)")
    for path in SHIPPED:
        if path.is_file() and path != SOURCES:
            pattern = data_pattern if path.suffix == ".csv" else text_pattern
            for m in pattern.finditer(path.read_text(encoding="utf-8", errors="replace")):
                key = next(g for g in m.groups() if g)
                out.setdefault(key, set()).add(str(path.relative_to(ROOT)))
    return out


def test_nothing_cites_a_file_outside_the_repo() -> None:
    offenders = [
        str(p.relative_to(ROOT)) for p in SHIPPED
        if p.is_file() and re.search(r"REFERENCE(\.md)? §|shared/REFERENCE", p.read_text(errors="replace"))
    ]  # fmt: skip
    assert offenders == []


def test_every_cited_key_is_listed() -> None:
    entries, cited = _entries(), _cited()
    assert len(cited) >= 10  # the catalog rows and the code cite sources
    missing = {k: sorted(v) for k, v in cited.items() if k not in entries}
    assert missing == {}


def test_every_entry_has_a_link_and_a_date() -> None:
    for key, row in _entries().items():
        assert re.search(r"https?://|doi:|arXiv:|measured by this project", row), key
        assert re.search(r"\b(19|20)\d\d\b", row), key
