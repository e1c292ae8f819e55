"""`rightsize plan`'s recommendation line gives an always-on online plan's month (730 h) beside its hour, in text
only: `--json` keeps the hourly price."""

from __future__ import annotations

import json

from plan_fixtures import cpu_curve, printed_plan, small_catalog

from rightsize.plan.planner import plan
from rightsize.plan.result import PlanResult
from rightsize.spec import Workload
from rightsize.units import format_usd

ONLINE = {"rate_per_s": 20, "latency": {"percentile": 95, "bound_ms": 200}}


def _plan(targets: dict[str, object]) -> PlanResult:
    w = Workload.model_validate({"name": "s", "model": "distilbert", "targets": targets})
    return plan(w, [cpu_curve("c.2x", 20.0, 15.0)], small_catalog())


def test_an_always_on_online_plan_prints_its_month() -> None:
    res = _plan({"online": ONLINE})
    rec = res.recommendation
    assert rec is not None and not rec.idle_policy
    hourly, month = format_usd(rec.cost_usd_per_hour), format_usd(rec.cost_usd_per_hour * 730)
    lines = printed_plan(res)
    line = lines[[x.strip() for x in lines].index("Recommendation") + 1]
    assert f": {hourly}/h (~{month}/month), " in line, line
    assert "/month" not in json.dumps(res.to_dict())  # text only: --json's fields are unchanged


def test_a_plan_priced_as_a_days_average_prints_no_month() -> None:
    """An idle policy's hourly price is a day's average over part-time traffic: a month of it is not the bill."""
    res = _plan({"online": ONLINE, "cold_start": {"active_hours_per_day": 8}})
    rec = res.recommendation
    assert rec is not None and rec.idle_policy
    assert not any("/month" in line for line in printed_plan(res))
