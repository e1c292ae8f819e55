"""The generative plan's report: candidates with $/1M tokens, TTFT/TPOT vs rate, tokens/s vs concurrency."""

from __future__ import annotations

import itertools
import re
from dataclasses import replace
from pathlib import Path

import pytest

from rightsize.catalog import load_catalog
from rightsize.llm.plan import plan_generative
from rightsize.llm.shape import DecoderShape
from rightsize.report.generative import RATE_FACTORS, _stats, concurrency_points, write_generative_report
from rightsize.spec.targets import GenerativeTarget

TARGET = GenerativeTarget.model_validate({
    "rate_per_s": 2.0, "prompt_tokens": 256, "output_tokens": 64,
    "ttft": {"percentile": 95, "bound_ms": 3000}, "tpot": {"percentile": 50, "bound_ms": 80},
})  # fmt: skip


@pytest.mark.slow  # > 1.9 s: make test runs it, make test-fast skips it
def test_html_and_markdown_reports_carry_the_curves_and_the_cost_per_token(tmp_path: Path) -> None:
    plan = plan_generative(DecoderShape.from_zoo("llama-7b"), TARGET, load_catalog(), providers=["aws"])
    rec = plan.recommendation
    assert rec is not None
    html_path, md_path = tmp_path / "r.html", tmp_path / "r.md"
    write_generative_report(plan, TARGET, "chat", html_path)
    write_generative_report(plan, TARGET, "chat", md_path)
    html = html_path.read_text()
    shown = min(4, sum(c.meets for c in plan.candidates))
    for chart in ("ttft-rate", "tpot-rate", "tokens-concurrency"):
        fig = re.search(rf'<figure[^>]*data-chart="{chart}".*?</figure>', html, re.S)
        assert fig is not None, chart
        assert fig.group(0).count('class="pt"') >= shown  # at least one point per candidate
        # every point is projected: hollow, as the main report draws projected points
        assert fig.group(0).count('class="pt"') == len(re.findall(r'class="pt"[^>]*fill="#fff"', fig.group(0)))
        if chart != "tokens-concurrency":  # the SLO's line carries its value
            bound = TARGET.ttft.bound_ms if chart == "ttft-rate" else TARGET.tpot.bound_ms
            assert f"{chart[:4].upper()} bound {bound:,g} ms" in fig.group(0)
    assert html.count("<tr>") == len(plan.candidates) + 1 and f"{rec.usd_per_m_output_tokens:.2f}" in html
    assert rec.watts is not None and f"{rec.watts:.0f} W at {rec.busy:.0%} busy" in html  # the power box
    assert f"math units {rec.compute_share:.0%} of that" in html
    # the columns carry the target's percentiles, and "projected" says nothing was timed (not "no GPU was measured")
    assert "<th>TTFT p95 ms</th><th>TPOT p50 ms</th>" in html and "nothing was timed for this plan" in html
    assert "tokens/s at 1 sequence<" in html and "at 1 sequences" not in html
    md = md_path.read_text()
    assert "| TTFT p95 ms | TPOT p50 ms |" in md
    assert "Recommended:" in md and md.count("TTFT / TPOT vs rate") == shown
    # the Markdown page carries the concurrency evidence too, and the CLI's kWh figures (3 decimals)
    assert md.count("Decode tokens/s vs concurrency") == shown
    tps = concurrency_points(plan, rec)
    assert tps[0][0] == 1 and all(b2 > b1 and t2 > t1 for (b1, t1), (b2, t2) in itertools.pairwise(tps))
    assert rec.kwh_per_m_output_tokens is not None and f"{rec.kwh_per_m_output_tokens:.3f}" in md
    # the sweep is the simulator over the same replicas: TTFT rises with the rate
    sweep = plan.sweep(rec, TARGET, RATE_FACTORS)
    assert [r for r, _, _ in sweep] == [TARGET.rate_per_s * f for f in RATE_FACTORS]
    assert sweep[-1][1] >= sweep[0][1]


def test_a_plan_no_option_serves_says_so_instead_of_an_empty_table(tmp_path: Path) -> None:
    """A 70B spec with TPOT <= 2 ms printed a table header over no rows, in the CLI and both reports."""
    tight = TARGET.model_copy(update={"tpot": TARGET.tpot.model_copy(update={"bound_ms": 2.0})})
    plan = plan_generative(DecoderShape.from_zoo("llama-70b"), tight, load_catalog(), instances=["p5.48xlarge"])
    assert plan.recommendation is None and not plan.candidates
    html_path, md_path = tmp_path / "r.html", tmp_path / "r.md"
    write_generative_report(plan, tight, "imp", html_path)
    write_generative_report(plan, tight, "imp", md_path)
    html, md = html_path.read_text(), md_path.read_text()
    assert 'data-table="candidates"' not in html and "No instance option serves it: see why below." in html
    assert "| instance |" not in md and "No instance option serves it: see why below." in md


@pytest.mark.slow  # ~3 s: make test runs it, make test-fast skips it
def test_one_output_token_and_a_cpu_row_print_no_tpot_and_no_tp(tmp_path: Path) -> None:
    """output_tokens: 1 read "TPOT 0.0" in the table and the card, a flat TPOT chart at 0 under its bound and
    "203 / 0 ms" in the Markdown sweep; a c7i.48xlarge row read tp 1 (a CPU replica has no tensor parallelism)."""
    one = GenerativeTarget.model_validate(TARGET.model_dump() | {"output_tokens": 1, "rate_per_s": 5.0,
                                                                 "prompt_tokens": 512})  # fmt: skip
    plan = plan_generative(DecoderShape.from_zoo("llama-7b"), one, load_catalog(),
                           instances=["g6.xlarge", "c7i.48xlarge"])  # fmt: skip
    assert {c.instance for c in plan.candidates if c.meets} == {"g6.xlarge", "c7i.48xlarge"}
    html_path, md_path = tmp_path / "r.html", tmp_path / "r.md"
    write_generative_report(plan, one, "one", html_path)
    write_generative_report(plan, one, "one", md_path)
    html, md = html_path.read_text(), md_path.read_text()
    assert re.search(r"^\| c7i\.48xlarge \| intel-sapphire-rapids \| - \| 1 \| 1 \| [\d.,]+ \| \d+ \| n/a \|", md, re.M)
    assert re.search(r"^\| g6\.xlarge \| L4 \| 1 \|", md, re.M)
    assert "TTFT vs rate, 1 x g6.xlarge: " in md and "TPOT vs rate" not in md and " / 0 ms" not in md
    assert 'data-chart="ttft-rate"' in html and 'data-chart="tpot-rate"' not in html
    assert re.search(r"<span>TTFT / TPOT</span><b>\d+ ms / n/a \(1 output token\)</b>", html)
    assert "<span>layout</span><b>1 x g6.xlarge, tp 1, 1 replica(s)</b>" in html
    cpu = replace(plan.candidates[0], instance="c7i.48xlarge", device_class="cpu")  # a CPU card: no tp
    assert "<span>layout</span><b>1 x c7i.48xlarge, 1 replica(s)</b>" in _stats(plan, cpu)
