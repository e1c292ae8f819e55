"""rightsize validate's verdict: the spec's SLO judged on the level served at the plan's per-replica rate."""

from __future__ import annotations

import pytest

from rightsize.loadgen.validation import ValidationPoint
from rightsize.profile import Latency
from rightsize.workflows.validate import slo_verdict, speed_note


def _level(label: str, measured: Latency | None, **kw: object) -> ValidationPoint:
    return ValidationPoint(label, 12.0, 0.4, Latency(10, 20, 30), measured, 2.0, **kw)


def test_the_slo_is_judged_at_the_planned_level_only() -> None:
    met = slo_verdict(
        [_level("planned", Latency(9, 31, 40)), _level("80%", Latency(30, 400, 900))], 95, 80, "c6i.2xlarge"
    )
    assert met is not None and met.startswith("SLO met here: p95 31.0 ms against 80 ms at the plan's per-replica rate")
    assert "stands in for c6i.2xlarge" in met  # the 80% level's 400 ms is not the plan's load: not judged
    missed = slo_verdict([_level("planned", Latency(9, 95, 140))], 95, 80, "c6i.2xlarge")
    assert missed is not None and missed.startswith("SLO missed here: p95 95.0 ms against 80 ms")
    p99 = slo_verdict([_level("planned", Latency(9, 31, 90))], 99, 80, "x")
    assert p99 is not None and p99.startswith("SLO missed here: p99 90.0 ms")


def test_a_run_that_dropped_requests_does_not_meet_the_slo_and_no_planned_level_gives_no_verdict() -> None:
    dropped = slo_verdict([_level("planned", Latency(9, 31, 40), error_fraction=0.2)], 95, 80, "x")
    assert dropped is not None and dropped.startswith("SLO missed here") and "dropped requests" in dropped
    assert slo_verdict([_level("50%", Latency(9, 31, 40))], 95, 80, "x") is None
    assert slo_verdict([_level("planned", None)], 95, 80, "x") is None


def test_validate_serves_its_cpu_curve_on_cpu_pools_even_where_cuda_is() -> None:
    """On a lent H200 a CPU layout served with the default router got a GPU pool beside it (hybrid where CUDA is):
    the check of a CPU curve must not be answered by a GPU."""
    from rightsize.plan import Batching
    from rightsize.serve.config import resolve_pools
    from rightsize.spec.load import parse_spec
    from rightsize.workflows.validate import local_server_config

    w = parse_spec({"model": "distilbert", "input": {"seq_len": 64}})
    config = local_server_config(w, "bf16", Batching(max_batch=4, max_wait_ms=0.0), workers=1, threads=1)
    pools = resolve_pools(config, has_cuda=True, cores=2)
    assert [(p.device, p.workers, p.threads) for p in pools] == [("cpu", 1, 1)]


def test_a_level_run_beside_other_work_is_not_judged() -> None:
    """With a CPU hog beside it, validate printed "SLO met here" (or missed) from a level the hog had shaped."""
    busy = ("other processes kept 48% of this machine's cores busy during this level: its latency is this "
            "machine's load, not the plan's: run it again on a quiet machine")  # fmt: skip
    verdict = slo_verdict([_level("planned", Latency(9, 31, 40), valid=False, notes=[busy])], 95, 80, "x")
    assert verdict == "SLO not judged here: other processes kept 48% of this machine's cores busy during this level"


@pytest.mark.slow  # ~3 s of busy loops
def test_others_busy_counts_other_processes_not_this_ones_children() -> None:
    import subprocess
    import sys
    import time

    from rightsize.measure.conditions import OthersBusy

    code = "import time\nt = time.time()\nwhile time.time() - t < 3: pass\n"
    mine = subprocess.Popen([sys.executable, "-c", code])  # a child: this process's own work, as a server is
    try:
        time.sleep(0.3)
        with OthersBusy() as own:
            time.sleep(1.0)
    finally:
        mine.kill()
    other = subprocess.Popen(["sh", "-c", f"exec {sys.executable} -c '{code}' & wait"], start_new_session=True)
    try:  # a grandchild of a shell: still ours. So the hog runs in a process no longer under this one:
        time.sleep(0.3)
        other.kill()  # the shell goes; the hog is re-parented away from this process's tree
        time.sleep(0.2)
        with OthersBusy() as others:
            time.sleep(1.0)
    finally:
        subprocess.run(["pkill", "-f", "while time.time\\(\\) - t < 3"], check=False)
    if own.share is None or others.share is None:
        pytest.skip("no /proc/stat here")
    assert others.share > own.share + 0.25  # one busy core of this machine's, whatever else runs beside


def test_a_report_of_an_infeasible_plan_says_so_first() -> None:
    """`validate` on a spec no plan meets printed "plan: 0 replica(s)", the verdict buried mid-line."""
    from rightsize.workflows.validate import render_report

    report = {
        "name": "absurd", "model": "distilbert", "arrival": "poisson", "duration_s": 2.0, "points": [], "notes": [],
        "candidate": {"precision": "fp32", "max_batch": 8, "max_wait_ms": 2.0, "why": "no plan was feasible",
                      "replicas": 0, "feasible": False},
        "local": {"capacity_per_s": 900.0, "batch_sizes": [1, 4], "per_replica_rate_per_s": 1e6},
    }  # fmt: skip
    lines = render_report(report).splitlines()
    assert lines[0].startswith("no plan meets this spec's target (`rightsize plan` says why)")
    assert "plan: none meets the target; poisson arrivals" in lines[2] and "0 replica(s)" not in "\n".join(lines)


def test_the_speed_drift_note_says_faster_or_slower() -> None:
    """The note said "+18% off the profile's speed", which read as slower when the machine was faster."""
    assert speed_note(44.1, 37.4) == (
        "this machine is 18% faster now than when profiled (capacity 44.1/s re-timed vs 37.4/s profiled); "
        "levels use the re-timed one"
    )
    assert speed_note(30.0, 37.4).startswith("this machine is 20% slower now than when profiled (capacity 30.0/s")
