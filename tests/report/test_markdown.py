"""The Markdown report: recommendation, tables, escaping."""

from __future__ import annotations

import dataclasses
from dataclasses import replace
from pathlib import Path

from report_kit import MEMORY, XSS, curves, profile_for

from rightsize.plan.result import PlanResult
from rightsize.report import build_report_data, render_markdown


def _table_rows(md: str, heading: str) -> list[str]:
    lines = md.split("\n")
    i = next(k for k, line in enumerate(lines) if line.startswith(heading))
    rows = []
    for line in lines[i + 2 :]:
        if not line.startswith("|"):
            if rows:
                break
            continue
        rows.append(line)
    return rows[2:]  # without the header and the separator


def test_markdown_has_the_recommendation_and_ranked_table(plan_online: PlanResult) -> None:
    md = render_markdown(build_report_data(plan_online, profile=profile_for(), memory=MEMORY))
    assert "## Recommendation" in md
    assert "**2 × c7i.2xlarge bf16**" in md and "$0.71/h, $4.96 per 1M requests" in md
    assert "p50/p95/p99 48.4/88.0/114 ms" in md  # three significant digits each, as the HTML card
    assert "## Why not the alternative" in md and "**1 × g6.xlarge fp16**" in md
    rows = _table_rows(md, "## Ranked candidates")
    assert len(rows) == len(plan_online.candidates)
    assert rows[0].startswith("| 1 ★ | c7i.2xlarge |")
    assert "no: p95 131 ms exceeds the 120 ms SLO" in rows[5]
    assert len(_table_rows(md, "## Pareto frontier")) == 3
    assert len(_table_rows(md, "## Measured profile")) == 10
    assert "| total | 1.3 GiB |" in md  # 0.25 + 0.9 + 0.2 GiB


def test_the_measured_profile_names_each_points_threads_and_what_disturbed_it(plan_online: PlanResult) -> None:
    """Two thread counts of one batch are two configs, and a contended point says so with its estimated slowdown
    (they had read as duplicates, the 16x-slow one unflagged); the HTML chart keeps them in separate series."""
    from rightsize.report.charts import latency_charts

    profile = profile_for()
    one, two = replace(profile.measurements[0], threads=1), replace(profile.measurements[0], threads=2)
    busy = replace(two, extra={"contended": True, "contention": 0.5, "gflops_vs_best": 0.25})
    data = build_report_data(plan_online, profile=replace(profile, measurements=(one, busy)))
    rows = _table_rows(render_markdown(data), "## Measured profile")
    assert rows[0].startswith("| cpu | fp32 | 1 | 1 |") and rows[0].endswith("MiB |  |")  # clean: no quality word
    assert rows[1].startswith("| cpu | fp32 | 2 | 1 |") and "contended, ~4.0x slow |" in rows[1]
    svg = "".join(latency_charts(data))
    assert "fp32 1 thr" in svg and "fp32 2 thr" in svg and "(measured, contended, ~4.0x slow)" in svg


def test_projected_layouts_of_one_instance_are_told_apart_in_the_legend(plan_online: PlanResult) -> None:
    """Two k workers x t threads curves of one instance and precision had drawn two legend entries alike."""
    from rightsize.profile import ServiceCurve
    from rightsize.report.charts import latency_charts

    bs = (1, 2, 4)

    def cpu(workers: int, threads: int) -> ServiceCurve:
        times = tuple(5.0 * threads + b for b in bs)
        return ServiceCurve("cpu:c7i.2xlarge", "int8", bs, times, (0.05,) * 3, "projected", 0.7, 1.5,
                            instance="c7i.2xlarge", threads=threads, workers=workers)  # fmt: skip

    data = build_report_data(plan_online, curves=[cpu(4, 2), cpu(2, 4), curves()[0]])
    svg = "".join(latency_charts(data))
    assert "c7i.2xlarge int8 4 × 2 thr projected (median)" in svg and "c7i.2xlarge int8 2 × 4 thr projected" in svg
    assert "A10G fp16 projected" in svg  # a lone curve keeps its short name
    # two instances one projection serves alike (one family and size) draw one line named for both, layouts apart;
    # through the stored plan too, whose curves had come back with no layout
    twin = [dataclasses.replace(c, instance="Standard_F8s_v2", device="cpu:Standard_F8s_v2") for c in (cpu(4, 2),
            cpu(2, 4))]  # fmt: skip
    stored = plan_online.to_dict() | {"curves": [dataclasses.asdict(c) for c in (cpu(4, 2), cpu(2, 4), *twin)]}
    svg = "".join(latency_charts(build_report_data(stored)))
    assert svg.count("c7i.2xlarge = Standard_F8s_v2 int8 4 × 2 thr projected (median)<") == 1, svg
    assert "c7i.2xlarge = Standard_F8s_v2 int8 2 × 4 thr projected (median)<" in svg
    assert ">Standard_F8s_v2 int8" not in svg


def test_markdown_escapes_html_and_table_syntax(plan_online: PlanResult) -> None:
    bad = replace(plan_online, workload=XSS, why=["a | b"])
    bad.candidates[0] = replace(bad.candidates[0], instance="x|y<b>")
    md = render_markdown(build_report_data(bad))
    assert "<script>" not in md and "<b>" not in md
    assert r"\<script\>alert(1)\</script\>" in md
    assert r"x\|y\<b\>" in md and r"- a \| b" in md


def test_training_markdown_lists_spot_plans(plan_training: PlanResult) -> None:
    md = render_markdown(build_report_data(plan_training))
    assert "time" in md and "## Spot with checkpoints" in md
    assert len(_table_rows(md, "## Spot with checkpoints")) == 2  # spot and mixed for 4 × g5.xlarge
    assert "93%" in md


def test_training_tables_show_each_plans_scaling(plan_training: PlanResult, tmp_path: Path) -> None:
    from rightsize.report import write_report

    plan = replace(plan_training, candidates=[replace(plan_training.candidates[0], scaling_efficiency=0.874),
                                              *plan_training.candidates[1:]])  # fmt: skip
    md = render_markdown(build_report_data(plan))
    header = next(line for line in md.splitlines() if " instance | device |" in line)
    assert "| scale | time |" in header and "| 87% |" in md
    html = write_report(plan, tmp_path / "t.html").read_text()
    assert "<th>scale</th>" in html and "<td>87%</td>" in html


def test_a_request_mix_section_has_instances_and_the_fleets_notes(plan_online: PlanResult) -> None:
    pool = {"instance": "c7i.2xlarge", "device": "cpu", "precision": "bf16", "count": 1, "replicas": 4,
            "batching": {"max_batch": 1}, "latency_ms": {"p95": 34.6}, "cost_usd_per_hour": 0.36}  # fmt: skip
    note = "split at 32 samples: 4 replicas on 1 x c7i.2xlarge (cpu) ... (two clouds: aws and gcp behind one router)"
    fleet = {"mix": [{"samples": 1, "share": 0.95}], "choice": "single", "single": pool, "notes": [note]}
    md = render_markdown(build_report_data(replace(plan_online, fleet=fleet)))
    assert "| instances | replicas |" in md and "| c7i.2xlarge | cpu bf16 | 1 | 4 |" in md
    assert "two clouds: aws and gcp behind one router" in md


def test_markdown_keeps_code_spans_in_warnings(plan_online: PlanResult) -> None:
    warn = "projected, not measured on L4; check with `rightsize validate` before committing"
    plan = replace(plan_online, warnings=[warn], why=["run `a | b` then <b>x</b>"])
    md = render_markdown(build_report_data(plan))
    assert f"- {warn}" in md and "\\`" not in md  # a code span, not literal backticks
    assert r"- run `a \| b` then \<b\>x\</b\>" in md  # pipes still escaped (tables), raw HTML outside spans too


def test_md_escapes_lone_backticks_and_keeps_code_span_text() -> None:
    from rightsize.report.fmt import md

    assert md("`rightsize validate`") == "`rightsize validate`"
    assert md("``a`b`` and `c_d` e_f") == r"``a`b`` and `c_d` e\_f"  # a span's text is literal: no \_ there
    assert md("lone ` tick *x*") == r"lone \` tick \*x\*"
    assert md("`x|y` | z") == r"`x\|y` \| z"


def test_a_spot_job_shorter_than_its_checkpoint_interval_reads_none_needed() -> None:
    """A 15-minute job's report read "checkpoint every 1,859 min"; the plan's own warning already said none."""
    from rightsize.report.fmt import checkpoint_every

    assert checkpoint_every({"checkpoint_interval_min": 1859.0}, 0.25) == "none needed (longer than the job)"
    assert checkpoint_every({"checkpoint_interval_min": 15.5}, 4.88) == "15.5 min"
    assert checkpoint_every({"checkpoint_interval_min": 15.5}, None) == "15.5 min"
    # checkpoint_minutes 0: every step (it had read "none needed" from an infinite interval); the work is weighed,
    # not the expected wall time
    assert checkpoint_every({"checkpoint_interval_min": 0.0, "work_hours": 2.57}, 3.18) == "every step (free)"
    assert (
        checkpoint_every({"checkpoint_interval_min": 170.0, "work_hours": 2.57}, 3.18)
        == "none needed (longer than the job)"
    )


def test_a_mixed_runs_cost_per_hour_is_labelled_its_average() -> None:
    """The plan says "$/h averaged over the run" for a mixed spot/on-demand row; the report printed it as a price."""
    from rightsize.report.html import _stats
    from rightsize.report.markdown import _headline

    row = {"cost_usd_total": 3.07, "cost_usd_per_hour": 14.36, "runtime_hours": 0.21, "purchase": "mixed",
           "device": "A100", "precision": "fp32", "instance": "p4d.24xlarge", "count": 1}  # fmt: skip
    assert "$14.36/h averaged over the run" in _headline(row, "training")
    assert ("cost per hour (run average)", "$14.36") in _stats(row, "training")
    assert "averaged" not in _headline({**row, "purchase": "spot"}, "training")


def test_markdown_carries_the_cards_caveats_and_a_check_heading(plan_online: PlanResult) -> None:
    """The HTML card listed "sized at the pessimistic edge of the projection band ..." and the Markdown dropped it;
    its warnings were headed "Warnings" where the CLI says "Check"."""
    assert plan_online.recommendation is not None and plan_online.alternative is not None
    rec = replace(plan_online.recommendation, notes=["sized at the pessimistic edge of the projection band (x2.16)"])
    alt = replace(plan_online.alternative, notes=["bf16 extrapolated from fp32 (not measured here)"])
    plan = replace(plan_online, recommendation=rec, alternative=alt, warnings=["spot: left out"])
    md = render_markdown(build_report_data(plan))
    assert "- note: sized at the pessimistic edge of the projection band (x2.16)" in md
    assert "- note: bf16 extrapolated from fp32 (not measured here)" in md
    assert "## Check\n\n- spot: left out" in md and "## Warnings" not in md


def test_the_target_reads_as_the_spec_writes_it() -> None:
    """The HTML target table showed Python's `False` and `{'samples': 1, 'share': 0.95}`."""
    from rightsize.report.html import flatten

    target = {"online": {"request_mix": [{"samples": 1, "share": 0.95}, {"samples": 32, "share": 0.05}]},
              "spot": False, "rate": 0.5}  # fmt: skip
    assert dict(flatten(target)) == {"online.request_mix": "samples 1 share 0.95, samples 32 share 0.05",
                                     "spot": "false", "rate": "0.5"}  # fmt: skip
