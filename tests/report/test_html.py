"""The HTML report (no browser): contents, numbers, charts present, offline, escaped."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest
from report_kit import MEMORY, XSS, curves, fake_sweep, profile_for, training_plan

from rightsize.errors import SpecError
from rightsize.plan.result import PlanResult
from rightsize.report import write_report

ONLINE_CHARTS = ["latency-batch", "throughput-batch", "p95-rate", "pareto", "memory"]
TRAINING_CHARTS = ["pareto", "memory", "cluster-time", "cluster-cost", "spot-cost", "spot-time"]


def _charts(html: str) -> dict[str, int]:
    """{chart name: number of .pt marks} for every drawn chart."""
    out = {}
    for m in re.finditer(r'<figure class="chart" data-chart="([^"]+)">(.*?)</figure>', html, re.S):
        out[m.group(1)] = len(re.findall(r'class="pt[ "]', m.group(2)))
    return out


def _online_html(tmp_path: Path, plan: PlanResult) -> str:
    path = write_report(
        plan, tmp_path / "r.html", profile=profile_for(), curves=curves(), memory=MEMORY, sweep=fake_sweep
    )
    return path.read_text()


def test_online_report_shows_the_recommendation_costs_and_environment(tmp_path: Path, plan_online: PlanResult) -> None:
    html = _online_html(tmp_path, plan_online)
    assert "2 × c7i.2xlarge" in html
    assert "$0.71" in html  # 2 × $0.357/h
    assert "$4.96" in html  # $0.714/h / (40 req/s × 3600 s) × 1e6 requests
    assert "48.4 / 88.0 / 114 ms" in html  # p50 / p95 / p99, three significant digits each (not "88" beside "48.4")
    assert "prices of 2025-06" in html
    assert "AMD EPYC 9B14 (test A)" in html and "envaaaa11111" in html  # measured on
    assert "cheapest setup that meets p95 ≤ 120 ms at 40 req/s" in html  # why
    assert "GPU utilization 12% (&lt; 20%: overbuying)" in html  # why not, escaped
    assert "1 × g6.xlarge" in html  # the alternative
    assert "no batching window" in html  # warnings


def test_online_report_draws_every_chart_with_points(tmp_path: Path, plan_online: PlanResult) -> None:
    charts = _charts(_online_html(tmp_path, plan_online))
    assert list(charts) == ONLINE_CHARTS
    assert all(n > 0 for n in charts.values()), charts
    # 2 precisions x 5 batches x (p50 + p95) measured + 2 projected curves x 6 batches
    assert charts["latency-batch"] == 2 * 5 * 2 + 2 * 6
    assert charts["pareto"] == 8 + 1  # every candidate with a latency, plus the recommendation highlighted
    assert charts["memory"] == 3  # weights, activations, workspace


def test_svg_fragments_are_well_formed(tmp_path: Path, plan_online: PlanResult) -> None:
    html = _online_html(tmp_path, plan_online)
    svgs = re.findall(r"<svg.*?</svg>", html, re.S)
    assert len(svgs) == len(ONLINE_CHARTS)
    for s in svgs:
        ET.fromstring(s)


def test_report_is_self_contained(tmp_path: Path, plan_online: PlanResult) -> None:
    html = _online_html(tmp_path, plan_online)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "<link" not in html and "@import" not in html and "url(" not in html
    assert "<script" not in html  # the report needs no JavaScript at all
    assert html.startswith("<!doctype html>") and html.rstrip().endswith("</html>")


def test_user_strings_are_escaped(tmp_path: Path, plan_online: PlanResult) -> None:
    bad = replace(plan_online, model=XSS, workload=XSS, why=[XSS], warnings=[XSS], target={"note": XSS})
    bad.candidates[0] = replace(bad.candidates[0], instance=XSS, reasons=[XSS])
    bad.recommendation = bad.candidates[0]
    html = write_report(bad, tmp_path / "x.html", profile=profile_for(model=XSS), env={"cpu_model": XSS}).read_text()
    assert "<script>" not in html
    assert html.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 6


def test_training_report_has_cluster_and_spot_charts(tmp_path: Path, plan_training: PlanResult) -> None:
    html = write_report(plan_training, tmp_path / "t.html", memory=MEMORY).read_text()
    charts = _charts(html)
    assert list(charts) == TRAINING_CHARTS
    assert all(n > 0 for n in charts.values()), charts
    assert charts["cluster-time"] == 8  # 2 instance types x 4 cluster sizes, on-demand only
    assert charts["spot-cost"] == 3  # on-demand, spot, mixed for 4 × g5.xlarge
    assert 'data-chart-skipped="latency-batch"' in html  # no profile given: said, not hidden
    assert "deadline 12 h" in html and "budget $80.00" in html
    assert "P(meet deadline)" in html and "93%" in html


def test_the_spot_chart_draws_only_rows_the_plan_kept(tmp_path: Path, plan_training: PlanResult) -> None:
    """bert-finetune's chart drew an Azure T4 spot bar at $0.017 that the plan had left out (no interruption
    estimate for it), beside the recommendation's $0.10."""
    first = plan_training.candidates[0]
    left_out = replace(first, instance="Standard_NC4as_T4_v3", purchase="spot", feasible=False,
                       cost_usd_total=0.017, reasons=["no interruption estimate for this spot row"])  # fmt: skip
    plan = replace(plan_training, candidates=[*plan_training.candidates, left_out])
    html = write_report(plan, tmp_path / "s.html", memory=MEMORY).read_text()
    spot = html.split('data-chart="spot-cost"')[1].split("</figure>")[0]
    assert "Standard_NC4as_T4_v3" not in spot and _charts(html)["spot-cost"] == 3
    assert "4×g5.xlarge fp16" in spot or "4×g5.xlarge bf16" in spot  # the category names the precision


def test_missing_sweep_skips_the_rate_chart_with_a_note(tmp_path: Path, plan_online: PlanResult) -> None:
    html = write_report(plan_online, tmp_path / "n.html").read_text()
    assert 'data-chart-skipped="p95-rate"' in html
    assert "no rate sweep was stored with this plan" in html
    assert 'data-chart="pareto"' in html


def test_no_feasible_candidate_says_why(tmp_path: Path, plan_online: PlanResult) -> None:
    none = replace(
        plan_online, recommendation=None, alternative=None, pareto=[], why=["every candidate misses the SLO"]
    )
    html = write_report(none, tmp_path / "none.html").read_text()
    assert "No candidate meets the target" in html
    assert "every candidate misses the SLO" in html
    assert "<td>over budget</td><td>1</td>" in html  # the infeasible summary
    unsized = replace(none, candidates=[replace(none.candidates[0], count=0, feasible=False)])
    row = write_report(unsized, tmp_path / "unsized.html").read_text().split('data-table="candidates"')[1]
    assert "</span></td><td>cpu</td><td>-</td><td>bf16</td>" in row  # no count was sized: "-", not "0"


def test_rules_plan_renders_a_table_without_charts(tmp_path: Path, plan_online: PlanResult) -> None:
    rules = replace(plan_online, kind="rules", pareto=[])
    html = write_report(rules, tmp_path / "rules.html").read_text()
    assert 'data-table="candidates"' in html and "<svg" not in html
    # ranked by rule, not by price alone: the header had said "feasible by cost" above cheaper rows ranked lower
    assert "ranked by rule: holds the data in RAM" in html and "feasible by cost" not in html
    assert "feasible by cost (ties: a verified price, a precision the spec lists, the narrower band, then faster)" in (
        write_report(plan_online, tmp_path / "o.html").read_text())  # fmt: skip
    assert "Ranked by rule: holds the data in RAM" in write_report(rules, tmp_path / "rules.md").read_text()


def test_report_suffix_decides_the_format_and_bad_suffix_is_a_spec_error(
    tmp_path: Path, plan_online: PlanResult
) -> None:
    md = write_report(plan_online, tmp_path / "deep" / "r.md")
    assert md.read_text().startswith("# rightsize: text-classification-api")
    with pytest.raises(SpecError, match=r"--report: must end in \.html or \.md"):
        write_report(plan_online, tmp_path / "r.txt")


def test_visual_defects_fixed(tmp_path: Path, plan_online: PlanResult) -> None:
    """Legend glyphs match plot markers; the recommendation's line is drawn on top and thicker; the ranked
    table shows the verdict second; an infeasible alternative says why instead of a row of '-'."""
    import dataclasses

    html = _online_html(tmp_path, plan_online)
    legend = re.findall(r'<span class="sw ([^"]*)"', html)
    assert any("square" in cls for cls in legend) and any("circle" in cls for cls in legend)  # p95 squares keyed
    rate = re.search(r'data-chart="p95-rate">(.*?)</figure>', html, re.S)
    assert rate is not None
    lines = re.findall(r"<polyline[^>]*>", rate.group(1))
    assert lines and 'data-highlight="1"' in lines[-1]  # the recommended line is the last drawn
    head = re.search(r'data-table="candidates"><thead><tr>(.*?)</tr>', html)
    assert head is not None and re.findall(r"<th>([^<]*)</th>", head.group(1))[:3] == ["#", "ok", "instance"]
    alt = plan_online.alternative
    assert alt is not None
    bad = dataclasses.replace(alt, feasible=False, latency=None, reasons=["t(1) alone exceeds the SLO"])
    html2 = _online_html(tmp_path, dataclasses.replace(plan_online, alternative=bad))
    card = re.search(r'<section class="card alt">(.*?)</section>', html2, re.S)
    assert card is not None and "not feasible: t(1) alone exceeds the SLO" in card.group(1)
    assert "<b>-</b>" not in card.group(1)


def test_estimated_latencies_are_marked_in_the_candidates_table(tmp_path: Path, plan_online: PlanResult) -> None:
    from rightsize.plan.online import FLUID_METHOD

    c = plan_online.candidates[-1]
    assert c.latency is not None
    estimated = replace(c, latency=replace(c.latency, method=FLUID_METHOD))
    html = _online_html(tmp_path, replace(plan_online, candidates=[*plan_online.candidates[:-1], estimated]))
    table = re.search(r'data-table="candidates".*?</table>', html, re.S)
    assert table is not None and f"~{c.latency.p95:.3g}" in table.group(0).replace(",", "")
    assert "not simulated" in html


def test_pareto_caption_states_the_frontiers_step(tmp_path: Path, plan_online: PlanResult) -> None:
    """ "nothing beats on both" left n1-highcpu-8+t4 (24.65 ms, $0.633/h) off the frontier unexplained: a point must be
    5% faster than the cheaper one before it online (plan.explain.PARETO_STEP), 1% for a job."""
    pareto = _online_html(tmp_path, plan_online).split('data-chart="pareto"')[1].split("</figure>")[0]
    assert "each at least 5% faster than the cheaper one before it (closer is noise)" in pareto
    job = write_report(training_plan(), tmp_path / "t.html").read_text().split('data-chart="pareto"')[1]
    assert "each at least 1% faster than the cheaper one before it" in job.split("</figure>")[0]


def test_a_replica_just_under_full_reads_99_point_something(tmp_path: Path, plan_online: PlanResult) -> None:
    rec = plan_online.recommendation
    assert rec is not None and rec.latency is not None
    busy = replace(rec, latency=replace(rec.latency, utilization=0.9956693558474277))
    html = _online_html(tmp_path, replace(plan_online, recommendation=busy))
    assert "<span>utilization</span><b>99.6%</b>" in html
