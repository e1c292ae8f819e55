"""The latency-vs-cost table: ranked by the cost the user picked, and saying how many rows it shows of how many."""

from __future__ import annotations

import re
from pathlib import Path

from rightsize.catalog import load_catalog
from rightsize.report.dashboard import render_path


def _table(html: str) -> list[list[str]]:
    body = html.split('data-table="cheapest"')[1].split("</tbody>")[0]
    return [re.findall(r"<td>(.*?)</td>", tr) for tr in body.split("<tr>")[2:]]


def _usd(cell: str) -> float:
    return float(cell.replace("$", "").replace(",", ""))


def test_the_table_says_how_many_rows_it_shows_and_links_the_rest(two_run_store: tuple[Path, str, str]) -> None:
    path, _, _ = two_run_store
    status, html = render_path(path, "/cost?device_class=gpu", load_catalog(""))
    assert status == 200
    assert len(_table(html)) == 14  # 4 planned GPU candidates + 10 priced GPU measurements: all fit
    assert "14 of 14 rows shown; 2 infeasible planned candidates sort last (all shown)." in html
    status, html = render_path(path, "/cost", load_catalog(""))
    rows = _table(html)
    assert len(rows) == 15  # cut to 15, as before, but no longer silently
    assert "15 of 34 rows shown; 3 infeasible planned candidates sort last (none of them shown)." in html
    assert 'href="/cost?cost=per1m&amp;rows=all">Show all 34</a>' in html
    status, html = render_path(path, "/cost?rows=all", load_catalog(""))
    rows = _table(html)
    assert len(rows) == 34 and "34 of 34 rows shown" in html
    assert sum("infeasible" in r[-1] for r in rows) == 3  # the infeasible ones the heading names are in the table
    assert all("infeasible" in r[-1] for r in rows[-3:])  # last
    assert '<input type="hidden" name="rows" value="all">' in html  # a filter change keeps rows=all


def test_the_table_is_ranked_by_the_cost_picked(two_run_store: tuple[Path, str, str]) -> None:
    path, _, _ = two_run_store
    _, html = render_path(path, "/cost?cost=hour&rows=all", load_catalog(""))
    assert "<h2>Cheapest by USD per hour first</h2>" in html
    feasible = [r for r in _table(html) if "infeasible" not in r[-1]]
    per_hour = [_usd(r[7]) for r in feasible]
    assert per_hour == sorted(per_hour)
    _, html = render_path(path, "/cost?rows=all", load_catalog(""))
    assert "<h2>Cheapest by USD per 1M requests / samples first</h2>" in html
    by_1m = [r for r in _table(html) if "infeasible" not in r[-1]]
    assert [_usd(r[8]) for r in by_1m] == sorted(_usd(r[8]) for r in by_1m)
    assert [_usd(r[7]) for r in by_1m] != sorted(_usd(r[7]) for r in by_1m)  # the two orders differ in this store


def test_a_bad_rows_value_is_a_400_naming_it(two_run_store: tuple[Path, str, str]) -> None:
    path, _, _ = two_run_store
    status, html = render_path(path, "/cost?rows=0", load_catalog(""))
    assert status == 400
    assert "rows: must be a whole number above 0 or &#x27;all&#x27;, got &#x27;0&#x27;" in html
