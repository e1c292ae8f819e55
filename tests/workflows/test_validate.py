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


def test_validate_checks_the_spec_plan_and_stores_no_timing_of_its_own_thread_count(
    monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    """validate had added the server's core count to the spec's threads, planned again and stored those timings: on a
    busy machine the plan it checked (and every later `rightsize plan`) read "4 replicas on 1 x c7a.xlarge (4x1t,
    int8)" where the user had read "2 x c7a.large (1x2t, fp32)". The spec's plan is checked; the 1-thread curve is
    timed for the check alone."""
    from pathlib import Path

    import rightsize.measure.sweep as sweep
    import rightsize.workflows.plan as wplan
    import rightsize.workflows.validate as validate
    from rightsize.cpus import CpuSplit
    from rightsize.plan import Batching, Candidate, PlanResult
    from rightsize.profile import Environment, Measurement, Profile
    from rightsize.spec.load import parse_spec
    from rightsize.store import Store

    spec = {"model": "mobilenet_v2", "input": {"image_size": 224}, "batch_sizes": [1, 8], "precisions": ["fp32"],
            "devices": ["cpu"], "targets": {"online": {"rate_per_s": 60, "latency": {"percentile": 95,
                                                                                      "bound_ms": 150}}}}  # fmt: skip
    w = parse_spec(spec)
    env, inp = Environment("here"), {"image_size": 224}

    def m(b: int, threads: int | None, p50: float) -> Measurement:
        return Measurement("mobilenet_v2", "inference", "cpu", "fp32", b, threads, inp, "ok",
                           latency_ms=Latency(p50, p50 * 1.05, p50 * 1.1, std=0.05 * p50), env_id="here")  # fmt: skip

    cand = Candidate("c7a.large", "aws", "us-east-1", "cpu", "cpu", 2, "fp32", "on_demand", 0.205, True, "measured",
                     "2025-06", batching=Batching(1, 0.0), replicas=2, workers_per_instance=1,
                     threads_per_worker=2)  # fmt: skip
    planned: list[list[int | None]] = []

    def plan_spec(workload: object, *a: object, **k: object) -> tuple[PlanResult, dict[str, object]]:
        planned.append(list(workload.threads))  # type: ignore[attr-defined]
        result = PlanResult("online", "x", "mobilenet_v2", {}, cand, [cand], [cand])
        return result, {"profile": Profile("mobilenet_v2", "inference", inp, env, (m(1, None, 17.8), m(8, None, 114)))}

    swept: list[tuple[list[str], list[int | None]]] = []

    def run_sweep(workload: object, store: object, **k: object) -> sweep.SweepResult:
        swept.append((list(workload.precisions), list(workload.threads)))  # type: ignore[attr-defined]
        assert store is None
        return sweep.SweepResult(None, env, [m(1, 1, 40.0), m(8, 1, 300.0)])

    monkeypatch.setattr(wplan, "plan_spec", plan_spec)
    monkeypatch.setattr(sweep, "run_sweep", run_sweep)
    monkeypatch.setattr(validate, "split_cpus", lambda: CpuSplit(frozenset({0}), frozenset({1})))
    monkeypatch.setattr(validate, "validate_config", lambda *a, **k: [])
    store = Store(Path(str(tmp_path)) / "s.sqlite")
    report = validate.validate_spec(w, store, progress=False, retime=False)
    assert planned == [[None]]  # the spec as written, once: the plan `rightsize plan` printed
    assert swept == [(["fp32"], [1])]
    c = report["candidate"]
    assert (c["instance"], c["replicas"], c["layout"], c["precision"]) == ("c7a.large", 2, "1x2", "fp32")
    assert report["local"]["latency_ms"] == [40.0, 300.0] and report["local"]["threads"] == 1
    assert any(n.startswith("timed fp32 at 1 thread(s) too") and "not stored" in n for n in report["notes"])
    assert store.measurements() == []
    assert validate.plan_words(cand) == "2 x c7a.large (1x2t, fp32)"
