"""The plan's footer gives the dates of the prices it used: the recommendation's (its price line's), then the ranked
candidates' span when that differs. It had given the candidates' newest date, so a user file's undated row (dated by
the file's modification day) put "prices 2026-11-29" under a pick whose line said "price 2026-10"."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from cli_kit import run_cli

from rightsize.cli.plan import _price_dates

ROOT = Path(__file__).resolve().parents[2]


def _result(rec: str | None, *dates: str) -> Any:
    candidates = [SimpleNamespace(price_date=d) for d in dates]
    recommendation = None if rec is None else SimpleNamespace(price_date=rec)
    return cast(Any, SimpleNamespace(candidates=candidates, recommendation=recommendation,
                                     price_date=max(dates, default="")))  # fmt: skip


@pytest.mark.parametrize(
    ("rec", "dates", "footer"),
    [
        (
            "2026-10",
            ("2026-10", "2025-06", "2026-11-29"),
            "2026-10 (the recommendation's; the candidates' 2025-06 to 2026-11-29)",
        ),
        ("2025-06", ("2025-06", "2025-06"), "2025-06"),
        (None, ("2025-06", "2025-01"), "2025-01 to 2025-06"),
        (None, ("2025-06",), "2025-06"),
        (None, (), ""),
    ],
)
def test_the_footer_gives_the_recommendations_price_date_and_the_candidates_span(
    rec: str | None, dates: tuple[str, ...], footer: str
) -> None:
    assert _price_dates(_result(rec, *dates)) == footer


def test_a_user_rows_file_date_does_not_stand_for_the_recommendations_price(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = tmp_path / "mine.csv"  # an undated row takes the file's date; it is too dear to be recommended
    mine.write_text(
        "provider,region,instance_type,vcpus,ram_gib,cpu_family,accelerator,accelerator_count,on_demand_usd_per_hour,"
        "spot_usd_per_hour,spot_interruption,price_date,source\nonprem,lab,big-box,64,512,intel-icelake,,0,50,,,,\n"
    )
    day = dt.date.fromtimestamp(mine.stat().st_mtime).isoformat()
    argv = ["plan", str(ROOT / "examples/gradient-boosting.yaml"), "--catalog", str(mine), "--store"]
    code, out, _ = run_cli([*argv, str(tmp_path / "s.db")], capsys)
    assert code == 0
    text = " ".join(out.split())
    assert "price 2025-06, " in text
    assert f"; prices 2025-06 (the recommendation's; the candidates' 2025-01 to {day})" in text
