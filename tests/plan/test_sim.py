"""The serving simulator against queueing closed forms, and its batching semantics."""

from __future__ import annotations

import numpy as np
import pytest

from rightsize.plan.lanes import run_lanes
from rightsize.plan.queueing import (
    fluid_batching,
    md1_mean_sojourn_ms,
    md1_sojourn_quantile_ms,
    mm1_sojourn_quantile_ms,
    mmc_sojourn_quantile_ms,
)
from rightsize.plan.sim import SimConfig, simulate

SERVICE_MS = 10.0


def _rel(a: float, b: float) -> float:
    return abs(a - b) / b


@pytest.mark.parametrize("engine", ["lindley", "lanes", "events"])
@pytest.mark.parametrize("rate_per_s", [50.0, 70.0])
def test_mm1_percentiles_match_closed_form(engine: str, rate_per_s: float) -> None:
    # p99 at rho 0.7 needs a few hundred thousand requests to be within ~3% (autocorrelated waits)
    n = 600_000 if engine != "events" else 300_000
    res = simulate(
        lambda b: SERVICE_MS,
        SimConfig(rate_per_s=rate_per_s, service="exponential"),
        n_requests=n,
        seed=3,
        engine=engine,
    )
    lam = rate_per_s / 1000.0
    for q, got in ((0.5, res.latency.p50), (0.95, res.latency.p95), (0.99, res.latency.p99)):
        assert _rel(got, mm1_sojourn_quantile_ms(lam, SERVICE_MS, q)) < 0.05, (q, got)
    assert _rel(res.latency.mean, 1.0 / (1.0 / SERVICE_MS - lam)) < 0.05
    assert res.utilization == pytest.approx(lam * SERVICE_MS, rel=0.03)


@pytest.mark.parametrize("engine", ["lindley", "lanes", "events"])
def test_md1_matches_pollaczek_khinchine_and_erlang(engine: str) -> None:
    lam = 0.07  # rho 0.7
    n = 600_000 if engine != "events" else 300_000
    res = simulate(
        lambda b: SERVICE_MS,
        SimConfig(rate_per_s=lam * 1000, service="deterministic"),
        n_requests=n,
        seed=5,
        engine=engine,
    )
    assert _rel(res.latency.mean, md1_mean_sojourn_ms(lam, SERVICE_MS)) < 0.05
    assert _rel(res.latency.p95, md1_sojourn_quantile_ms(lam, SERVICE_MS, 0.95)) < 0.05
    assert _rel(res.latency.p99, md1_sojourn_quantile_ms(lam, SERVICE_MS, 0.99)) < 0.05
    assert res.latency.p50 >= SERVICE_MS  # nobody finishes faster than one service time


def test_md1_closed_form_itself() -> None:
    # rho -> 0: no wait; the P-K mean at rho 0.5 is D (1 + 0.5 / (2 * 0.5)) = 1.5 D
    assert md1_mean_sojourn_ms(0.05, 10.0) == pytest.approx(15.0)
    assert md1_sojourn_quantile_ms(1e-6, 10.0, 0.95) == pytest.approx(10.0, rel=1e-3)


@pytest.mark.parametrize("balancer", ["central", "jsq"])
def test_two_servers_match_mmc(balancer: str) -> None:
    """A shared queue is exactly M/M/2; JSQ with per-replica queues is close to it (slightly worse)."""
    lam = 0.15  # per ms; two servers of mean 10 ms: rho 0.75
    cfg = SimConfig(rate_per_s=lam * 1000, replicas=2, service="exponential", balancer=balancer)
    res = simulate(lambda b: SERVICE_MS, cfg, n_requests=600_000 if balancer == "central" else 150_000, seed=7)
    exact = mmc_sojourn_quantile_ms(2, lam, SERVICE_MS, 0.95)
    if balancer == "central":
        assert _rel(res.latency.p95, exact) < 0.05
    else:
        assert exact * 0.97 < res.latency.p95 < exact * 1.25


def test_p2c_between_jsq_and_random() -> None:
    base = {"rate_per_s": 300.0, "replicas": 4, "service": "exponential"}
    p95 = {
        b: simulate(lambda _: SERVICE_MS, SimConfig(**base, balancer=b), n_requests=60_000, seed=11).latency.p95  # type: ignore[arg-type]
        for b in ("jsq", "p2c", "random")
    }
    assert p95["jsq"] <= p95["p2c"] <= p95["random"]
    # random routing splits Poisson into 4 independent M/M/1 queues at 75 req/s each
    assert _rel(p95["random"], mm1_sojourn_quantile_ms(0.075, SERVICE_MS, 0.95)) < 0.06


def test_batch_fills_before_the_window_expires() -> None:
    """Triton semantics: a batch leaves as soon as it is full, or when the oldest request has waited W."""
    arrivals = np.array([0.0, 1.0, 2.0, 3.0, 100.0, 200.0])
    svc = np.array([[5.0, 5.0, 5.0, 5.0]])  # t(k) = 5 ms for k = 0..3 requests
    out = run_lanes(
        arrivals, np.array([1]), np.array([3]), np.array([10.0]), svc, np.zeros_like(svc), np.random.default_rng()
    )
    dep = out.latency_ms[0] + arrivals
    # requests 0-2 fill a batch of 3 at t = 2 -> done at 7; request 3 waits the window (10 ms) -> 13 + 5 = 18
    np.testing.assert_allclose(dep, [7.0, 7.0, 7.0, 18.0, 115.0, 215.0])
    assert int(out.batches[0]) == 4


def test_window_counts_from_the_oldest_request_and_server_busy() -> None:
    """While the server is busy, arrivals queue; when it frees up it takes all waiting (up to K) at once."""
    arrivals = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
    svc = np.array([[20.0, 20.0, 20.0, 20.0, 20.0]])
    out = run_lanes(
        arrivals, np.array([1]), np.array([4]), np.array([0.0]), svc, np.zeros_like(svc), np.random.default_rng()
    )
    dep = out.latency_ms[0] + arrivals
    # W = 0: request 0 runs alone (0 -> 20); requests 1-4 are queued at 20 and go together (20 -> 40)
    np.testing.assert_allclose(dep, [20.0, 40.0, 40.0, 40.0, 40.0])


def test_events_engine_has_the_same_batching_semantics() -> None:
    from rightsize.plan.events import run_balanced

    arrivals = np.array([0.0, 1.0, 2.0, 3.0, 100.0, 200.0])
    svc = np.array([5.0, 5.0, 5.0, 5.0])
    lat, busy, batches = run_balanced(arrivals, 1, 3, 10.0, svc, np.zeros(4), np.random.default_rng())
    np.testing.assert_allclose(lat + arrivals, [7.0, 7.0, 7.0, 18.0, 115.0, 215.0])
    assert batches == 4 and busy == pytest.approx(20.0)


def test_batching_raises_capacity_and_matches_fluid_batch() -> None:
    """t(b) = c + a b: greedy batching settles near b* = lambda c / (1 - rho) (docs/sources.md `inoue-2019`)."""
    c, a, lam = 8.0, 1.0, 0.5  # per ms; rho = 0.5, b* = 8, cycle 16 ms

    def t(b: float) -> float:
        return c + a * b

    fl = fluid_batching(t, lam, 64)
    assert fl.batch == pytest.approx(8.0, rel=1e-3) and fl.cycle_ms == pytest.approx(16.0, rel=1e-3)
    res = simulate(t, SimConfig(rate_per_s=500.0, max_batch=64), n_requests=100_000, seed=2, engine="lanes")
    assert res.mean_batch == pytest.approx(8.0, rel=0.2)
    assert res.latency.mean < 2.0 * fl.cycle_ms  # ~1.5 cycles
    # without batching the same server is overloaded (t(1) = 9 ms > 2 ms between requests)
    assert not fluid_batching(t, lam, 1).stable


def test_request_samples_are_whole_requests() -> None:
    res = simulate(
        lambda b: 1.0 + 0.1 * b, SimConfig(rate_per_s=200.0, max_batch=10, request_samples=4), n_requests=20_000
    )
    assert res.mean_batch <= 8.0 + 1e-9  # at most 2 requests of 4 samples fit a batch of 10
    assert res.mean_batch % 4 == pytest.approx(0.0, abs=4.0)


def test_bursty_arrivals_hurt_the_tail() -> None:
    kw = {"rate_per_s": 50.0, "service": "exponential"}
    calm = simulate(lambda b: SERVICE_MS, SimConfig(**kw), n_requests=50_000, seed=1)  # type: ignore[arg-type]
    bursty = simulate(
        lambda b: SERVICE_MS, SimConfig(**kw, arrival="bursty", burstiness=3.0), n_requests=50_000, seed=1
    )  # type: ignore[arg-type]
    const = simulate(lambda b: SERVICE_MS, SimConfig(**kw, arrival="constant"), n_requests=50_000, seed=1)  # type: ignore[arg-type]
    assert const.latency.p95 < calm.latency.p95 < bursty.latency.p95


def test_lognormal_spread_uses_the_curve_cv() -> None:
    from rightsize.profile import ServiceCurve

    curve = ServiceCurve("cpu:x", "fp32", (1,), (10.0,), (0.5,), "measured")
    res = simulate(curve, SimConfig(rate_per_s=1.0), n_requests=20_000, seed=4)  # no queueing at 1 req/s
    # lognormal with median 10 and cv 0.5: mean = 10 * sqrt(1 + cv^2)
    assert res.latency.p50 == pytest.approx(10.0, rel=0.03)
    assert res.latency.mean == pytest.approx(10.0 * np.sqrt(1.25), rel=0.03)


def test_jsq_many_replicas_uses_the_heap_and_stays_near_mmc() -> None:
    """Past 32 replicas JSQ keeps a heap of lengths (below, a min() scan): both must stay near M/M/c."""
    lam = 0.75 * 40 / SERVICE_MS  # per ms: 40 servers at rho 0.75
    cfg = SimConfig(rate_per_s=lam * 1000, replicas=40, service="exponential", balancer="jsq")
    res = simulate(lambda b: SERVICE_MS, cfg, n_requests=120_000, seed=3)
    exact = mmc_sojourn_quantile_ms(40, lam, SERVICE_MS, 0.95)
    assert exact * 0.97 < res.latency.p95 < exact * 1.25


def test_replayed_arrivals_give_the_lindley_answer_by_hand() -> None:
    """A given schedule is served as given: with a constant service time the departures follow by hand."""
    a = np.array([0.0, 1.0, 2.0, 50.0, 51.0, 200.0])
    for engine in ("lindley", "events"):
        cfg = SimConfig(rate_per_s=1.0, service="deterministic")
        res = simulate(lambda b: 10.0, cfg, arrivals_ms=a, record_from_ms=1.5, engine=engine)
        # deps: 10, 20, 30, 60, 70, 210 -> latencies from the third on: 28, 10, 19, 10
        assert res.n_requests == 4
        assert res.latency.mean == pytest.approx((28 + 10 + 19 + 10) / 4), engine
    with pytest.raises(ValueError, match="sorted"):
        simulate(lambda b: 10.0, SimConfig(rate_per_s=1.0), arrivals_ms=a[::-1])
    with pytest.raises(ValueError, match="lanes"):
        simulate(lambda b: 10.0, SimConfig(rate_per_s=1.0), arrivals_ms=a, engine="lanes")


def test_service_ratios_replace_the_lognormal_spread() -> None:
    """Measured ratios (served time / t(b)) set the service distribution: a bimodal server's mean and
    utilisation come from the ratios, on both engines, batched or not."""
    ratios = np.array([0.5, 1.5])  # mean 1.0, cv 0.5: far from the curve's cv 0
    for max_batch, engine in ((1, "lindley"), (4, "events")):
        cfg = SimConfig(rate_per_s=50.0, max_batch=max_batch)
        det_cfg = SimConfig(rate_per_s=50.0, max_batch=max_batch, service="deterministic")
        det = simulate(lambda b: 10.0, det_cfg, n_requests=100_000, seed=1, engine=engine)
        emp = simulate(lambda b: 10.0, cfg, n_requests=100_000, seed=1, engine=engine, service_ratios=ratios)
        assert emp.utilization == pytest.approx(det.utilization, rel=0.05)
        assert emp.latency.p95 > det.latency.p95 * 1.1  # the spread lengthens the queue's tail
    with pytest.raises(ValueError, match="service_ratios"):
        simulate(lambda b: 10.0, SimConfig(rate_per_s=1.0), service_ratios=np.array([1.0, 0.0]))


def test_measured_ratios_in_order_keep_slow_spells_together() -> None:
    from rightsize.plan.events import ratio_draws

    ratios = np.array([1.0] * 50 + [3.0] * 10 + [1.0] * 40)
    got = ratio_draws(np.random.default_rng(3), ratios, 250, in_order=True)
    # the measured sequence from its first batch, repeated: the ten slow batches stay consecutive and
    # fall on the batches they slowed in the run (batch k of a replayed schedule takes ratio k)
    assert np.array_equal(got[:100], ratios)
    assert np.array_equal(got[:150], np.resize(ratios, 150))
    shuffled = ratio_draws(np.random.default_rng(3), ratios, 250)
    assert sorted(set(shuffled.tolist())) == [1.0, 3.0]
    # near saturation, a run of slow batches builds a longer queue than the same ratios drawn at random
    from rightsize.profile import ServiceCurve

    curve = ServiceCurve("cpu:t", "fp32", (1, 2), (10.0, 20.0), (0.0, 0.0), "measured")
    config = SimConfig(rate_per_s=50.0, replicas=1, max_batch=1, max_wait_ms=0.0)  # 60% busy
    kw = {"n_requests": 20_000, "engine": "events", "service_ratios": ratios}
    p99_order = simulate(curve, config, seed=1, ratios_in_order=True, **kw).latency.p99
    p99_random = simulate(curve, config, seed=1, **kw).latency.p99
    assert p99_order > 1.6 * p99_random  # 185-196 vs 86-94 ms


def test_curve_arrays_follow_the_curves_own_rules_for_every_size() -> None:
    """The vectorised table (a 1,000,000-sample request needs one that long) equals t_ms / cv_at size by size:
    interpolation, the floor below the smallest size, extrapolation past the largest, one-point curves, ties."""
    import numpy as np

    from rightsize.plan.sim import curve_arrays, lognormal_sigma, service_tables
    from rightsize.profile import ServiceCurve

    curves = [
        ServiceCurve("cpu", "fp32", (1, 8, 32), (10.0, 24.0, 80.0), (0.1, 0.2, 0.3), "measured"),
        ServiceCurve("cpu", "fp32", (4,), (10.0,), (0.2,), "measured"),
        ServiceCurve("cpu", "fp32", (2, 4, 16), (10.0, 9.0, 8.0), (0.0, 0.5, 0.1), "measured"),  # 3: a tie
    ]
    for c in curves:
        b = np.arange(1, 200)
        t, cv = curve_arrays(c, b)
        assert np.allclose(t, [c.t_ms(x) for x in b]) and np.allclose(cv, [c.cv_at(x) for x in b])
        tt, ss = service_tables(c, 50, 2)
        assert np.allclose(tt[1:], [c.t_ms(2 * k) for k in range(1, 51)])
        assert np.allclose(ss[1:], [lognormal_sigma(c.cv_at(2 * k)) for k in range(1, 51)])
