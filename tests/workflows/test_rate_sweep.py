"""The report's p95-vs-rate chart simulates each candidate as the plan judged it."""

from __future__ import annotations

import dataclasses

from plan_fixtures import cpu_curve, gpu_curve, small_catalog

from rightsize.plan import plan
from rightsize.report.data import compute_sweeps
from rightsize.spec import parse_spec
from rightsize.workflows.plan import sweep_fn


def test_the_chart_at_the_target_rate_reads_what_the_table_does() -> None:
    """The chart had taken an instance's first CPU worker layout and a projected curve's band centre: 137 ms at the
    target rate for a row the table had at 79.7 ms (another layout), 4.6 ms for a T4 row at 10.3 (its slow edge)."""
    w = parse_spec(
        {
            "model": "distilbert",
            "targets": {"online": {"rate_per_s": 10, "latency": {"percentile": 95, "bound_ms": 80}}},
        }
    )
    slow_layout = dataclasses.replace(cpu_curve("c.2x", 60.0, 40.0), workers=1, threads=8)  # first in the list
    fast_layout = dataclasses.replace(cpu_curve("c.2x", 30.0, 20.0), workers=4, threads=2)
    gpu = gpu_curve("T4", 4.0, 0.2, precision="fp32")  # projected, band x0.8-x1.25
    curves = [slow_layout, fast_layout, gpu]
    r = plan(w, curves, small_catalog())
    rows = {(c.instance, c.workers_per_instance): c for c in r.candidates if c.feasible and c.latency is not None}
    assert ("c.2x", 4) in rows and ("g.t4", 1) in rows, list(rows)
    sweep = sweep_fn(r, curves)
    for c in (rows["c.2x", 4], rows["g.t4", 1]):
        (p95,) = sweep(c, [10.0])
        assert abs(p95 / c.latency.p95 - 1) < 0.15, (c.instance, p95, c.latency.p95)
    sweeps, note = compute_sweeps(r, sweep)
    assert sweeps and not note
