"""rightsize validate's verdict: the spec's SLO judged on the level served at the plan's per-replica rate."""

from __future__ import annotations

from rightsize.loadgen.validation import ValidationPoint
from rightsize.profile import Latency
from rightsize.workflows.validate import slo_verdict


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
