"""Knee search: the pure search on a synthetic latency curve, then on a real single-worker server."""

from __future__ import annotations

import pytest
from lg_tiny_server import TinyServer

from rightsize.loadgen import (
    ClosedLoopConfig,
    LoadResult,
    OpenLoopConfig,
    Target,
    find_knee,
    find_knee_open_loop,
    meets_slo,
    run_closed_loop,
)
from rightsize.profile import Latency


def fake_result(rate: float, p95_ms: float | None, *, valid: bool = True, errors: int = 0) -> LoadResult:
    lat = None
    if p95_ms is not None:
        lat = Latency(p95_ms / 2, p95_ms, p95_ms, mean=p95_ms / 2, n=100, p90=p95_ms, p99_9=p95_ms, max=p95_ms)
    return LoadResult(
        mode="open",
        coordinated_omission="corrected",
        url="http://x",
        duration_s=1.0,
        requests_sent=100,
        responses_ok=100 - errors,
        achieved_rate_per_s=rate,
        throughput_per_s=rate,
        latency_ms=lat,
        errors={"http_503": errors} if errors else {},
        status_counts={},
        valid=valid,
        problems=[] if valid else ["generator fell behind: p99 send lag 99 ms > 10 ms"],
        offered_rate_per_s=rate,
    )


def mm1_like(rate: float) -> LoadResult:
    """p95 = 10 ms / (1 - rate/100): with a 50 ms SLO the knee is exactly 80/s."""
    return fake_result(rate, 10.0 / (1 - rate / 100) if rate < 100 else 1e6)


@pytest.mark.parametrize("start", [3.0, 10.0, 79.0, 500.0])
def test_search_brackets_the_knee_from_any_start(start: float) -> None:
    k = find_knee(mm1_like, 50.0, start_rate_per_s=start, tolerance=0.01, max_steps=40)
    assert k.rate_per_s is not None and k.upper_per_s is not None
    assert 80.0 * 0.99 <= k.rate_per_s <= 80.0 <= k.upper_per_s <= k.rate_per_s * 1.01
    assert all(s.meets_slo == (s.result.latency_ms is not None and s.result.latency_ms.p95 <= 50.0) for s in k.steps)
    assert not k.generator_limited


def test_search_reports_no_knee_and_respects_max_steps() -> None:
    never = find_knee(lambda r: fake_result(r, 1e6), 50.0, start_rate_per_s=10, max_steps=5)
    assert never.rate_per_s is None and len(never.steps) == 5
    capped = find_knee(lambda r: fake_result(r, 1.0), 50.0, start_rate_per_s=10, max_rate_per_s=1000)
    assert capped.rate_per_s == 640 and capped.upper_per_s is None  # never violated up to the cap


def test_errors_and_invalid_runs_fail_a_step() -> None:
    assert meets_slo(fake_result(10, 5.0), 50.0) == (True, "")
    ok, reason = meets_slo(fake_result(10, 5.0, errors=5), 50.0)
    assert not ok and "errors" in reason
    ok, reason = meets_slo(fake_result(10, 5.0, valid=False), 50.0)
    assert not ok and "invalid" in reason


def test_a_failure_is_confirmed_when_asked() -> None:
    calls: list[float] = []

    def noisy(rate: float) -> LoadResult:  # the first run at 40/s hits a stall; the knee is 50/s
        calls.append(rate)
        stalled = rate == 40 and calls.count(rate) == 1
        return fake_result(rate, 500.0 if stalled or rate > 50 else 5.0)

    k = find_knee(noisy, 50.0, start_rate_per_s=10, tolerance=0.3, confirm_failures=1)
    assert calls[:5] == [10, 20, 40, 40, 80] and calls.count(80) == 2
    assert k.rate_per_s == 50 and k.upper_per_s == 60
    calls.clear()
    plain = find_knee(noisy, 50.0, start_rate_per_s=10, tolerance=0.3)
    assert plain.rate_per_s == 35 and plain.upper_per_s == 40  # the lone stall at 40/s was believed


def test_an_invalid_step_is_retried_and_a_persistent_one_marks_the_knee_generator_limited() -> None:
    calls: list[float] = []

    def flaky(rate: float) -> LoadResult:
        calls.append(rate)
        first_time = calls.count(rate) == 1
        return fake_result(rate, 5.0, valid=not (rate == 40 and first_time))

    k = find_knee(flaky, 50.0, start_rate_per_s=10, max_rate_per_s=80)
    assert calls == [10, 20, 40, 40, 80]  # 40 re-run once after its invalid run
    assert k.rate_per_s == 80 and not k.generator_limited

    limited = find_knee(lambda r: fake_result(r, 5.0, valid=r < 40), 50.0, start_rate_per_s=10, tolerance=0.5)
    assert limited.rate_per_s == 30 and limited.upper_per_s == 40 and limited.generator_limited


def test_a_failing_server_is_not_put_on_the_generator_and_a_short_search_says_so() -> None:
    """All 500s: every step invalid for the server's failures, and the search had warned the generator fell behind.
    A search out of --max-steps with its bracket 100% wide reported its knee with no word."""
    failing = fake_result(10, None, valid=False)
    failing = LoadResult(**{**failing.__dict__, "problems": ["100% of answers were server errors (500 x100)"]})
    k = find_knee(lambda r: failing, 50.0, start_rate_per_s=10, max_steps=4)
    assert k.rate_per_s is None and not k.generator_limited and "fell behind" not in k.render()
    short = find_knee(lambda r: fake_result(r, 5.0 if r < 2000 else 99.0), 50.0, start_rate_per_s=50, max_steps=7)
    assert short.stopped_short and "warning: the steps ran out (--max-steps)" in short.render()
    full = find_knee(lambda r: fake_result(r, 5.0 if r < 2000 else 99.0), 50.0, start_rate_per_s=50, max_steps=30)
    assert not full.stopped_short and "ran out" not in full.render()


@pytest.mark.slow
def test_knee_of_a_single_worker_server_is_its_capacity(server: TinyServer) -> None:
    """One worker, 10 ms fixed service time, constant arrivals (D/D/1): below capacity latency stays
    near the service time; above it the backlog grows through the step, so the knee sits at capacity.
    Failing rates are confirmed once, since this shared machine's stalls can fail a step by themselves.

    The upper bound is physics, not a measurement: the server cannot serve more than 1000/10 = 100 req/s,
    and a 1.5 s step at rate r leaves a backlog whose p95 wait is about 0.95 * 1.5 s * (r/100 - 1), which
    passes a 150 ms SLO only up to r ~ 110/s. The lower bound is the closed-loop throughput measured in
    the same run (a closed loop under-reports on a loaded machine, so it is a floor, never a ceiling).
    """
    target = Target.from_url(server.url("/serial/10"))
    closed = run_closed_loop(target, ClosedLoopConfig(concurrency=4, duration_s=1.0)).throughput_per_s
    capacity = 1000.0 / 10
    assert closed <= 1.02 * capacity, closed
    step = OpenLoopConfig(rate_per_s=1, duration_s=1.5, arrival="constant", max_lag_ms=200.0)
    knee = find_knee_open_loop(
        target, step, 150.0, start_rate_per_s=60, tolerance=0.1, max_steps=12, pause_s=0.1, confirm_failures=1
    )
    assert knee.rate_per_s is not None, knee.render()
    assert 0.8 * closed <= knee.rate_per_s <= 1.12 * capacity, (closed, knee.render())
