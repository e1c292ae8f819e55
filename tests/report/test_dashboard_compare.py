"""/compare over plan runs: each plan's pick, cost and latency against its SLO, and the options side by side (two
plans had rendered as empty machine columns and an empty table); a mix of bench and plan runs is named, not
compared."""

from __future__ import annotations

import re
from pathlib import Path

from report_kit import online_plan

from rightsize.report.dashboard import render_path
from rightsize.store import Store


def _rows(html: str, table: str) -> dict[str, list[str]]:
    body = html.split(f'data-table="{table}"')[1].split("</tbody>")[0].split("<tbody>")[1]
    out = {}
    for tr in body.split("</tr>")[:-1]:
        cells = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<t[hd]>(.*?)</t[hd]>", tr)]
        out[cells[0]] = cells[1:]
    return out


def _plans(path: Path) -> tuple[str, str]:
    """The fixture's first plan run, and a second plan: a 50 ms SLO that the cheapest CPU option misses."""
    payload = online_plan("distilbert", workload="sentiment-api").to_dict()
    payload["target"]["online"]["latency"]["bound_ms"] = 50.0
    payload["candidates"] = payload["candidates"][1:]
    payload["recommendation"] = payload["candidates"][0]
    with Store(path) as st:
        first = next(r.id for r in st.runs() if r.kind == "plan")
        run = st.start_run("plan", name="sentiment-api", model="distilbert")
        st.save_artifact(run, "plan", payload)
        st.finish_run(run)
    return first, run


def test_two_plans_compare_pick_cost_slo_and_options(two_run_store: tuple[Path, str, str]) -> None:
    path, _, _ = two_run_store
    a, b = _plans(path)
    status, html = render_path(path, f"/compare?run={a}&run={b}")
    assert status == 200 and "<h1>Compare 2 plans</h1>" in html
    assert "no ok measurement" not in html  # the empty machine columns it had drawn
    picks = _rows(html, "compare-plans")
    assert picks["workload"] == ["text-classification-api", "sentiment-api"]
    assert picks["latency SLO"] == ["p95 ≤ 120 ms", "p95 ≤ 50 ms"]
    assert picks["pick"] == ["2 × c7i.2xlarge bf16 (aws us-east-1, cpu)", "1 × g6.xlarge fp16 (aws us-east-1, L4)"]
    assert picks["$/h"] == ["$0.71", "$0.80"]
    assert picks["predicted latency vs SLO"] == ["p95 88 ms of ≤ 120 ms (73%)", "p95 22 ms of ≤ 50 ms (44%)"]
    assert picks["feasible options"] == ["5 of 8", "4 of 7"]
    assert '<a href="/report/' in html and f'<a href="/run/{b}">{b}</a>' in html
    options = _rows(html, "compare-options")
    assert options["2 × c7i.2xlarge bf16 (aws us-east-1)"] == ["#1, $0.71/h, p95 88 ms, meets", "not in this plan"]
    assert options["1 × g6.xlarge fp16 (aws us-east-1)"] == [
        "#2, $0.80/h, p95 22 ms, meets",
        "#1, $0.80/h, p95 22 ms, meets",
    ]


def test_bench_and_plan_runs_are_named_not_compared(two_run_store: tuple[Path, str, str]) -> None:
    path, bench_a, bench_b = two_run_store
    plan_a, plan_b = _plans(path)
    status, html = render_path(path, f"/compare?run={bench_a}&run={plan_a}&run={bench_b}&run={plan_b}")
    assert status == 200 and "<h1>Cannot compare these runs</h1>" in html
    assert "These runs cannot be compared with one another" in html
    holds = _rows(html, "not-comparable")
    assert holds[bench_a][-1].startswith("measurements of one machine")
    assert holds[plan_a][-1].startswith("a plan: a recommendation and its priced options")
    assert f'href="/compare?run={bench_a}&amp;run={bench_b}">Compare the 2 measured runs</a>' in html
    assert f'href="/compare?run={plan_a}&amp;run={plan_b}">Compare the 2 plan runs</a>' in html


def test_two_training_plans_compare_time_and_total_cost(tmp_path: Path) -> None:
    """A job plan's options had read "p95 - ms" and its picks no run time, deadline or total."""
    from report_kit import training_plan

    from rightsize.report.fmt import hours

    path = tmp_path / "s.sqlite"
    payload = training_plan().to_dict()
    rec = payload["recommendation"]
    with Store(path) as st:
        ids = []
        for _ in range(2):
            run = st.start_run("plan", name="train", model="resnet50")
            st.save_artifact(run, "plan", payload)
            st.finish_run(run)
            ids.append(run)
    status, html = render_path(path, f"/compare?run={ids[0]}&run={ids[1]}")
    assert status == 200 and "p95 - ms" not in html
    picks = _rows(html, "compare-plans")
    h = rec["runtime_hours"]
    assert picks["run time"] == [hours(h)] * 2 and abs(float(hours(h).split()[0]) - h) < 0.01
    assert picks["total cost"] == [f"${rec['cost_usd_total']:,.2f}"] * 2
    assert picks["deadline"] == [hours(payload["target"]["training"]["deadline_hours"])] * 2
    options = _rows(html, "compare-options")
    first = next(iter(options.values()))
    assert first[0].startswith("#1, $") and "total, meets" in first[0] and first[0] == first[1]
