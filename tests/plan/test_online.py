"""Online planner: fewest replicas within headroom, cheapest feasible pick, infeasible reasons."""

from __future__ import annotations

import pytest
from plan_fixtures import cpu_curve, gpu_curve, small_catalog

from rightsize.plan.online import plan_online
from rightsize.plan.options import MemoryModel, pair_options
from rightsize.plan.result import Candidate
from rightsize.plan.sim import SimConfig, simulate
from rightsize.spec.targets import LatencyBound, OnlineTarget


def _target(rate: float, bound: float, **kw: object) -> OnlineTarget:
    return OnlineTarget(rate_per_s=rate, latency=LatencyBound(percentile=95, bound_ms=bound), **kw)  # type: ignore[arg-type]


def _by_name(cands):  # type: ignore[no-untyped-def]
    return {c.instance: c for c in cands}


def test_low_rate_small_model_goes_to_the_cheap_cpu() -> None:
    cat = small_catalog()
    curves = [cpu_curve("c.2x", 20.0, 15.0), cpu_curve("c.4x", 11.0, 8.0), gpu_curve("T4", 4.0, 0.2)]
    cands = _by_name(plan_online(pair_options(cat.instances, curves, cat.accelerators), _target(10, 80)))
    best = min((c for c in cands.values() if c.feasible), key=lambda c: c.cost_usd_per_hour)
    assert best.instance == "c.2x" and best.device_class == "cpu" and best.replicas == 1
    assert best.latency is not None and best.latency.p95 <= 80
    assert best.cost_usd_per_1m_requests == pytest.approx(0.34 / (10 * 3600) * 1e6)
    gpu = cands["g.t4"]
    assert gpu.feasible and gpu.latency is not None and gpu.latency.utilization < 0.2  # an idle GPU: overbuying


def test_replicas_are_the_fewest_that_meet_slo_within_headroom() -> None:
    cat = small_catalog()
    curves = [cpu_curve("c.2x", 30.0, 30.0)]  # 30 ms per request, no batching gain
    target = _target(60, 150)
    (cand,) = [c for c in plan_online(pair_options(cat.instances, curves, cat.accelerators), target) if c.feasible]
    # capacity: 60 req/s x 30 ms = 1.8 busy servers; / 0.8 headroom -> at least 3 replicas
    assert cand.replicas == 3 and cand.count == 3
    assert cand.cost_usd_per_hour == pytest.approx(3 * 0.34)
    assert cand.latency is not None and cand.latency.p95 <= 150
    assert cand.latency.utilization == pytest.approx(60 * 0.030 / 3, rel=0.1)
    # with headroom 1.0 two replicas (90% busy) would be allowed but miss the tail bound
    two = simulate(curves[0], SimConfig(rate_per_s=60, replicas=2, balancer="jsq"), n_requests=20_000)
    assert two.latency.p95 > 150


def test_a_rate_past_every_allowed_replica_count_is_infeasible_however_loose_the_slo() -> None:
    """At 10^5 req/s a screening run of a few thousand requests lasts a tenth of a second: too short for a queue past
    capacity to miss a loose bound. 64 replicas of 30 ms at 100,000 req/s (2,133 req/s of capacity) were "feasible"."""
    cat = small_catalog()
    curves = [cpu_curve("c.2x", 30.0, 30.0)]
    loose = _target(100_000, 10_000)
    (cand,) = plan_online(pair_options(cat.instances, curves, cat.accelerators), loose)
    # capacity: 100,000 req/s x 30 ms = 3,000 busy servers; / 0.8 headroom -> 3,750 replicas > 64
    assert not cand.feasible and cand.reasons[0].startswith("needs at least 3750 replicas to keep up"), cand.reasons
    enough = loose.model_copy(update={"rate_per_s": 1_000.0})  # 30 ms x 1,000 / 0.8 -> 38 replicas: within 64
    (ok,) = plan_online(pair_options(cat.instances, curves, cat.accelerators), enough)
    assert ok.feasible and ok.replicas >= 38


def test_gpu_batching_wins_at_high_rate_within_budget() -> None:
    cat = small_catalog()
    curves = [cpu_curve("c.2x", 25.0, 25.0), cpu_curve("c.4x", 13.0, 13.0), gpu_curve("T4", 5.0, 0.5)]
    target = _target(400, 120, budget_usd_per_hour=2.0)
    cands = plan_online(pair_options(cat.instances, curves, cat.accelerators), target)
    feas = sorted((c for c in cands if c.feasible), key=lambda c: c.cost_usd_per_hour)
    rec = feas[0]
    assert rec.instance == "g.t4" and rec.replicas == 1
    assert rec.batching is not None and rec.batching.max_batch > 1  # must batch: 400 req/s x 5.5 ms > 1
    assert rec.latency is not None and rec.latency.mean_batch > 1.5
    assert rec.latency.band_ms is not None  # projected curve: optimistic and pessimistic percentile
    # CPU would need >= ceil(400 x 0.025 / 0.8) = 13 small replicas: over the $2/h budget
    cpu = next(c for c in cands if c.instance == "c.2x")
    assert not cpu.feasible and any(r.startswith("over budget") for r in cpu.reasons)


def test_infeasible_candidates_say_why() -> None:
    cat = small_catalog()
    curves = [cpu_curve("c.2x", 200.0, 50.0), gpu_curve("T4", 5.0, 0.5), gpu_curve("A100-80GB", 2.0, 0.1)]
    memory = {"fp16": MemoryModel(fixed_bytes=20 * 2**30, per_sample_bytes=1e6)}  # 20 GiB of weights
    memory["fp32"] = MemoryModel(fixed_bytes=1e9, per_sample_bytes=1e6)
    cands = _by_name(plan_online(pair_options(cat.instances, curves, cat.accelerators, memory), _target(5, 80)))
    assert cands["c.2x"].reasons[0].startswith("t(1) alone exceeds the SLO")
    assert cands["g.t4"].reasons[0].startswith("does not fit memory")
    assert cands["p.a100"].feasible  # 80 GB holds 20 GiB
    over = plan_online(
        pair_options(cat.instances, curves[1:], cat.accelerators), _target(5, 80, budget_usd_per_hour=0.2)
    )
    assert all(not c.feasible and c.reasons[-1].startswith("over budget") for c in over)


def test_batch_cap_respects_memory() -> None:
    cat = small_catalog()
    curves = [gpu_curve("T4", 5.0, 0.5)]
    # 14.4 GiB usable on a T4 (rightsize.memory_budget: 90%): 10 GiB fixed + 1 GiB per sample leaves room for 4
    memory = {"fp16": MemoryModel(fixed_bytes=10 * 2**30, per_sample_bytes=2**30)}
    (c,) = plan_online(pair_options(cat.instances[2:3], curves, cat.accelerators, memory), _target(300, 100))
    assert c.feasible and c.batching is not None and c.batching.max_batch == 4


def test_spot_only_serving_adds_a_spare_and_skips_instances_without_spot() -> None:
    cat = small_catalog()
    curves = [cpu_curve("c.2x", 20.0, 15.0), gpu_curve("T4", 4.0, 0.2)]
    cands = _by_name(plan_online(pair_options(cat.instances, curves, cat.accelerators), _target(10, 80), ["spot"]))
    cpu = cands["c.2x"]
    assert cpu.feasible and cpu.purchase == "spot" and cpu.replicas == 2  # one replica + one spare
    assert cpu.cost_usd_per_hour == pytest.approx(2 * 0.15)
    from dataclasses import replace

    no_spot = replace(cat.instances[0], spot_usd_per_hour=None)
    (c,) = plan_online(pair_options([no_spot], curves[:1], cat.accelerators), _target(10, 80), ["spot"])
    assert not c.feasible and c.reasons[0].startswith("no spot offer")


def test_fluid_estimates_give_each_percentile_its_own_value() -> None:
    """Groups that cannot win are estimated, not simulated; their p50 < p95 < p99 all come from the estimate
    (a p99 equal to the target's p95 would read as measured)."""
    cat = small_catalog()
    # c.4x a little slower than c.2x: a curve equal to c.2x's would share its simulation (sim_key) and not be estimated
    curves = [cpu_curve("c.2x", 20.0, 15.0), cpu_curve("c.4x", 21.0, 15.0), gpu_curve("T4", 4.0, 0.2)]
    cands = plan_online(pair_options(cat.instances, curves, cat.accelerators), _target(10, 80), simulate_groups=1)
    fluid = [c for c in cands if c.latency is not None and c.latency.method == "fluid approximation"]
    assert fluid
    for c in fluid:
        assert c.latency is not None and c.latency.p50 < c.latency.p95 < c.latency.p99
        assert c.latency.p_target_ms == pytest.approx(c.latency.p95)
    # the CLI table marks them as estimates and says so under the table
    from rightsize.cli import _common
    from rightsize.cli.plan import print_plan
    from rightsize.plan.result import PlanResult

    with _common.out_console.capture() as cap:
        print_plan(PlanResult("online", "w", "m", {}, None, fluid, []), top=5)
    assert f"~{fluid[0].latency.p95:.1f}" in cap.get() and "fluid approximation, not simulated" in cap.get()


def test_a_band_by_batch_size_sizes_each_batch_at_its_own_edge() -> None:
    """GPU projections carry a wider band where the host sets the time (small batches) than where the GPU does:
    the pessimistic edge scales each batch size by its own multiplier, and the band re-centres on it."""
    from dataclasses import replace

    from rightsize.plan.online import at_pessimistic_edge

    cat = small_catalog()
    curve = gpu_curve("T4", 5.0, 0.5)
    n = len(curve.batch_sizes)
    banded = replace(curve, band_lo=0.6, band_hi=1.6, band_los=(0.6,) * 2 + (0.7,) * (n - 2),
                     band_his=(1.6,) * 2 + (1.3,) * (n - 2))  # fmt: skip
    opt = next(o for o in pair_options(cat.instances, [banded], cat.accelerators) if o.device == "T4")
    edge = at_pessimistic_edge(opt).curve
    for b, t, t0 in zip(curve.batch_sizes, edge.latency_ms, curve.latency_ms, strict=True):
        assert t == pytest.approx(t0 * (1.6 if b <= 2 else 1.3))
    assert edge.band_at(1) == pytest.approx((0.6 / 1.6, 1.0)) and edge.band_at(32) == pytest.approx((0.7 / 1.3, 1.0))
    assert edge.band_hi == 1.0 and "x1.30-x1.60 by batch size" in edge.source
    (gpu,) = [c for c in plan_online([opt], _target(400, 60)) if c.feasible]  # busy enough to batch
    assert gpu.batching is not None and gpu.batching.max_batch > 2
    assert gpu.band == pytest.approx((0.7 / 1.3, 1.0))  # the band of the batch size it runs at, not the widest
    low = banded.at_band_edge("lo")
    assert low.latency_ms[-1] == pytest.approx(curve.latency_ms[-1] * 0.7) and low.band_at(32)[0] == 1.0
    with pytest.raises(ValueError, match="band_los and band_his"):
        replace(curve, band_los=(0.5,) * n)


def test_every_worker_of_a_paid_instance_serves() -> None:
    """A 4-worker layout whose load needs one worker was planned as "1 replica" (1 worker on a 4-worker
    instance, 3 cores idle, busy and tail read off one worker) while `serve --workers 4` runs all four: the
    replicas fill the instances paid for, and the latency is simulated at that count."""
    from dataclasses import replace

    cat = small_catalog()
    one = cpu_curve("c.2x", 30.0, 30.0)
    four = replace(one, workers=4, threads=1)
    target = _target(10, 150)
    (single,) = [c for c in plan_online(pair_options(cat.instances, [one], cat.accelerators), target) if c.feasible]
    (filled,) = [c for c in plan_online(pair_options(cat.instances, [four], cat.accelerators), target) if c.feasible]
    assert single.replicas == 1 and single.count == 1
    assert filled.replicas == 4 and filled.count == 1 and filled.cost_usd_per_hour == single.cost_usd_per_hour
    assert single.latency is not None and filled.latency is not None
    assert filled.latency.utilization == pytest.approx(10 * 0.030 / 4, rel=0.15)  # a quarter of one worker's
    assert filled.latency.p95 < single.latency.p95  # no request waits behind another while a worker is free


def test_a_layout_with_more_workers_than_max_replicas_is_not_planned_short() -> None:
    """96 one-thread workers on one instance with max_replicas 64 were planned as "3 on 1" (the fill to whole
    instances stops at max_replicas) while `serve --workers 96` runs all 96; such a layout now says why it is out."""
    from dataclasses import replace

    cat = small_catalog()
    one = cpu_curve("c.4x", 30.0, 30.0)
    wide = replace(one, workers=8, threads=1)
    cands = plan_online(pair_options(cat.instances, [wide], cat.accelerators), _target(10, 150, max_replicas=4))
    (c,) = [c for c in cands if c.instance == "c.4x"]
    why = "runs 8 workers on one instance, past max_replicas=4 (layouts of fewer, wider workers are planned)"
    assert not c.feasible and c.reasons == [f"{why}; raise max_replicas to plan this one"]
    (ok,) = [c for c in plan_online(pair_options(cat.instances, [wide], cat.accelerators), _target(10, 150))
             if c.instance == "c.4x"]  # fmt: skip
    assert ok.feasible and ok.replicas == 8 and ok.count == 1


def test_a_multi_gpu_instance_serves_on_every_gpu_even_beside_a_one_gpu_sibling() -> None:
    """Options of one curve (T4 x1, T4 x4) share the simulation; each fills its own instance, and the long
    verification run keeps the 4-GPU row at 4 replicas instead of reusing the 1-GPU row's count."""
    from plan_fixtures import instance

    one, four = instance("g.t4", 0.53, acc="T4", count=1), instance("g.4t4", 1.2, acc="T4", count=4)
    cat = small_catalog()
    cands = plan_online(pair_options([one, four], [gpu_curve("T4", 4.0, 0.2)], cat.accelerators), _target(10, 80),
                        verify_top=4)  # fmt: skip
    by = _by_name(cands)
    assert by["g.t4"].replicas == 1 and by["g.4t4"].replicas == 4 and by["g.4t4"].count == 1
    assert by["g.4t4"].gpus == 4 and by["g.4t4"].latency is not None
    assert by["g.4t4"].latency.utilization < by["g.t4"].latency.utilization  # type: ignore[union-attr]


def test_every_point_of_the_cost_latency_frontier_is_simulated() -> None:
    """A fluid estimate reads the tail low (up to 2x at 60-70% busy); the frontier quoted such points as trade-offs
    (c7a.large fp32: ~747 ms shown, 1240 ms simulated). A group that lands on the frontier is simulated."""
    from rightsize.plan.explain import pareto

    cat = small_catalog()
    curves = [cpu_curve("c.2x", 30.0, 20.0), cpu_curve("c.4x", 6.0, 3.0), gpu_curve("T4", 20.0, 1.0)]
    cands = plan_online(pair_options(cat.instances, curves, cat.accelerators), _target(10, 200), simulate_groups=1)
    front = pareto(cands, "online")
    assert "c.4x" in {c.instance for c in front}  # dearer than the T4 but faster: a trade-off worth showing
    assert all(c.latency is not None and c.latency.method != "fluid approximation" for c in front)


def test_the_band_goes_on_the_recommendation_and_its_slow_end_is_the_prediction() -> None:
    """Two T4 rows at one price: the band went on the first by price alone, and the ranking recommended the other
    (no band, no pessimistic-edge check). And a curve sized at its slow edge was simulated again as the band's
    slow end, whose run-to-run noise read "30 ms > 27 ms at the pessimistic end" beside "meets p95 <= 27 ms"."""
    import dataclasses

    from rightsize.plan.explain import rank

    cat = small_catalog()
    t4 = next(i for i in cat.instances if i.instance_type == "g.t4")
    twin = dataclasses.replace(t4, instance_type="a.t4", provider="azure")  # the same price, sorts first by name
    instances = (*cat.instances, twin)
    target = _target(400, 120, budget_usd_per_hour=2.0)
    for seed in (0, 1):
        cands = plan_online(pair_options(instances, [gpu_curve("T4", 5.0, 0.5)], cat.accelerators), target, seed=seed)
        rec = rank(cands, "online")[0]
        assert rec.latency is not None and rec.latency.band_ms is not None, rec.instance
        lo, hi = rec.latency.band_ms
        assert lo < hi == rec.latency.p_target_ms  # sized at the slow edge: the prediction is the band's slow end


def test_a_model_that_failed_a_bigger_batch_is_never_batched_past_the_one_it_ran() -> None:
    """Its forward took batch 1 and raised at 8 ('only batch 1 supported'): the plan had batched it at 32, a
    configuration `serve` then refused."""
    import dataclasses

    from plan_fixtures import cpu_curve, gpu_curve, small_catalog

    from rightsize.plan import plan
    from rightsize.profile import Latency, Measurement, Profile, batch_limit, limit_batches
    from rightsize.spec import parse_spec

    lat = Latency(1.0, 1.1, 1.2, 1.0, 0.04, 20)
    ran = Measurement("m", "inference", "cpu", "fp32", 1, None, {"shape": [16]}, "ok", latency_ms=lat)
    failed = dataclasses.replace(ran, batch_size=8, status="failed", latency_ms=None,
                                 reason="ValueError: only batch 1 supported, got 8")  # fmt: skip
    oom = dataclasses.replace(failed, batch_size=4, reason="out of memory: cannot allocate")
    profile = Profile("m", "inference", {"shape": [16]}, {}, (ran, oom, failed))
    limit = batch_limit(profile)
    assert limit == (1, 8, "ValueError: only batch 1 supported, got 8")  # not the out-of-memory one
    assert batch_limit(dataclasses.replace(profile, measurements=(ran, oom))) is None
    w = parse_spec({"model": "m", "targets": {"online": {"rate_per_s": 300, "latency": {"bound_ms": 200}}}})
    curves = [limit_batches(c, limit) for c in (cpu_curve("c.2x", 4.0, 0.5), gpu_curve("T4", 4.0, 0.2, "fp32"))]
    r = plan(w, curves, small_catalog())
    assert r.recommendation is not None
    for c in r.candidates:
        assert c.batching is None or c.batching.max_batch == 1, (c.instance, c.batching)
    assert any(n.startswith("batches capped at 1: the model failed at batch 8") for n in r.recommendation.notes)


def _tied_rows_plan(monkeypatch: pytest.MonkeyPatch, n: int) -> tuple[int, int, list[Candidate]]:
    """Plan the small catalog plus ``n`` rows of one size and price, each with its own projected curve of equal
    numbers (what the projection builds per catalog row): (screening lanes run, long runs, ranked candidates)."""
    import dataclasses

    from plan_fixtures import instance

    import rightsize.plan.online as online
    import rightsize.plan.verify as verify
    from rightsize.plan.explain import rank

    cat = small_catalog()
    rows = [instance(f"zz{i}.large", 0.05, vcpus=2, ram_gib=4) for i in range(n)]
    tied = [dataclasses.replace(cpu_curve(f"zz{i}.large", 30.0, 25.0), provenance="projected", band_lo=0.8,
                                band_hi=1.25, source=f"projected onto zz{i}.large") for i in range(n)]  # fmt: skip
    curves = [cpu_curve("c.2x", 20.0, 15.0), gpu_curve("T4", 4.0, 0.2), *tied]
    counts = {"lanes": 0, "long": 0}
    screen, long_run = online._screen, verify.simulate_policy

    def counted_screen(jobs, *a, **kw):  # type: ignore[no-untyped-def]
        counts["lanes"] += len(jobs)
        return screen(jobs, *a, **kw)

    def counted_long(*a, **kw):  # type: ignore[no-untyped-def]
        counts["long"] += 1
        return long_run(*a, **kw)

    monkeypatch.setattr(online, "_screen", counted_screen)
    monkeypatch.setattr(verify, "simulate_policy", counted_long)
    options = pair_options([*cat.instances, *rows], curves, cat.accelerators)
    cands = rank(plan_online(options, _target(60, 150)), "online")
    return counts["lanes"], counts["long"], cands


def test_rows_of_one_size_and_price_are_simulated_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A catalog adding 1,000 rows of one size and price took minutes to plan: each row's curve (equal numbers, its
    own instance name) was its own group, every group at the best cost bound was screened, and every row at the
    lowest price got its own long runs. Curves that simulate alike now share one screening and one set of long
    runs, and each row still names its own instance at its own price."""
    lanes_1, long_1, one = _tied_rows_plan(monkeypatch, 1)
    lanes_n, long_n, many = _tied_rows_plan(monkeypatch, 40)
    assert (lanes_n, long_n) == (lanes_1, long_1), ((lanes_1, long_1), (lanes_n, long_n))
    rows = [c for c in many if c.instance.startswith("zz")]
    assert sorted(c.instance for c in rows) == sorted(f"zz{i}.large" for i in range(40))
    rec = one[0]
    assert rec.instance == "zz0.large" and rec.feasible and rec.latency is not None
    for c in rows:  # each its own row, planned alike: the same replicas, price and latency as the lone row
        assert c.feasible and c.latency is not None and c.curve is not None
        assert c.curve.device == f"cpu:{c.instance}" and c.curve.source.endswith(f"projected onto {c.instance}")
        assert (c.replicas, c.cost_usd_per_hour, c.latency.p95, c.latency.band_ms) == (
            rec.replicas, rec.cost_usd_per_hour, rec.latency.p95, rec.latency.band_ms)  # fmt: skip
    # the tie ranks by name, as the ranking always breaks one (explain.rank): the same order on every run
    assert [c.instance for c in many[:40]] == sorted(c.instance for c in rows)
