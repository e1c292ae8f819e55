"""Request-size mixes: the sized event simulator and the single-pool vs size-split fleet plan."""

from __future__ import annotations

import numpy as np
import pytest
from plan_fixtures import ACCELERATORS, cpu_curve, gpu_curve, instance

from rightsize.plan.events import run_balanced
from rightsize.plan.fleet import FleetPlan, plan_fleet, run_sized
from rightsize.plan.options import pair_options
from rightsize.plan.result import Candidate
from rightsize.spec.targets import LatencyBound, OnlineTarget


def _target(rate: float, bound: float, **kw: object) -> OnlineTarget:
    return OnlineTarget(rate_per_s=rate, latency=LatencyBound(percentile=95, bound_ms=bound), **kw)  # type: ignore[arg-type]


def test_sized_simulator_matches_the_fixed_size_one_when_every_request_is_one_sample() -> None:
    arrivals = np.cumsum(np.random.default_rng(1).exponential(2.0, 5000))
    t = np.array([1.0, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5])  # index = samples (= requests here)
    sig = np.full(9, 0.2)
    a, busy_a, nb_a = run_balanced(arrivals, 3, 8, 2.0, t, sig, np.random.default_rng(7), "jsq")
    b, busy_b, nb_b = run_sized(arrivals, np.ones(5000, dtype=int), 3, 8, 2.0, t, sig, np.random.default_rng(7))
    assert np.allclose(a, b) and busy_a == pytest.approx(busy_b) and nb_a == nb_b


def test_sized_simulator_reproduces_pollaczek_khinchine() -> None:
    """One server, one request per batch, deterministic service: M/D/1 mean wait = rho t / (2 (1 - rho))."""
    rng = np.random.default_rng(3)
    n, t_ms, rate_per_ms = 200_000, 4.0, 0.15  # rho 0.6
    arrivals = np.cumsum(rng.exponential(1.0 / rate_per_ms, n))
    sizes = rng.choice([1, 3], size=n)  # sizes vary, but each request runs alone (max_batch 3)
    t = np.full(4, t_ms)
    lat, _, batches = run_sized(arrivals, sizes, 1, 3, 0.0, t, np.zeros(4), rng)
    rho = rate_per_ms * t_ms
    assert batches > 0.5 * n  # two 1-sample requests may share a batch; a 3-sample one never does
    # Outside truth, with batching turned off by sizes of 3: every request alone
    lat3, _, _ = run_sized(arrivals, np.full(n, 3), 1, 3, 0.0, t, np.zeros(4), rng)
    assert lat3.mean() - t_ms == pytest.approx(rho * t_ms / (2 * (1 - rho)), rel=0.05)
    assert lat.mean() < lat3.mean()  # sharing batches only helps


def test_a_batch_takes_whole_requests_in_order_while_they_fit() -> None:
    # At 0.1 ms 9 samples are queued (>= 8): the batch starts, takes the 5-sample request, and stops, because
    # the 4-sample one would make 9. That one and the 3-sample request (7 samples) run next.
    arrivals = np.array([0.0, 0.1, 0.2])
    sizes = np.array([5, 4, 3])
    t = np.arange(9, dtype=float) + 10.0  # t(n) = 10 + n ms
    lat, busy, batches = run_sized(arrivals, sizes, 1, 8, 1.0, t, np.zeros(9), np.random.default_rng(0))
    assert batches == 2 and busy == pytest.approx(15.0 + 17.0)
    assert lat.tolist() == pytest.approx([15.1, 15.1 + 17.0 - 0.1, 15.1 + 17.0 - 0.2])


def _hybrid_catalog() -> tuple[list[object], list[object]]:
    instances = [
        instance("c.2x", 0.34, vcpus=8, ram_gib=16),
        instance("p.a100", 3.67, vcpus=12, ram_gib=85, acc="A100-80GB", count=1),
    ]
    # CPU: 4 ms a sample, no batching gain (t(32) = 128 ms: large requests cannot meet a 40 ms SLO there).
    # GPU: 12 ms per batch plus 0.1 ms a sample: cheap samples, but a small request waits behind a batch.
    curves = [cpu_curve("c.2x", 4.0, 4.0), gpu_curve("A100-80GB", 12.0, 0.1)]
    return instances, curves


def test_tight_slo_and_many_small_requests_split_the_fleet_cpu_small_gpu_large() -> None:
    instances, curves = _hybrid_catalog()
    options = pair_options(instances, curves, ACCELERATORS)  # type: ignore[arg-type]
    plan = plan_fleet(options, _target(150, 40), [(1, 0.95), (32, 0.05)])
    assert plan.split is not None and plan.single is not None
    crossover, small, large = plan.split
    assert crossover == 32 and small.device_class == "cpu" and large.device_class == "gpu"
    assert plan.choice == "split" and plan.split_cost < plan.single_cost
    for pool in (small, large, plan.single):
        assert pool.feasible and pool.latency is not None and pool.latency.p95 <= 40
    assert small.batching is not None and small.batching.max_batch >= 1
    assert large.batching is not None and large.batching.max_batch >= 32  # a batch holds a whole large request
    assert any("hybrid" in n for n in plan.notes) and any("cheaper" in n for n in plan.notes)
    d = plan.to_dict()
    assert d["choice"] == "split" and d["split"]["crossover_samples"] == 32  # type: ignore[index]


def test_one_size_only_has_no_split_and_an_impossible_slo_has_no_plan() -> None:
    instances, curves = _hybrid_catalog()
    options = pair_options(instances, curves, ACCELERATORS)  # type: ignore[arg-type]
    plan = plan_fleet(options, _target(50, 200), [(4, 1.0)])
    assert plan.split is None and plan.single is not None and plan.choice == "single"
    none = plan_fleet(options, _target(50, 5), [(1, 0.5), (32, 0.5)])  # 5 ms: nothing runs a batch that fast
    assert none.choice == "none" and none.single is None and none.split is None


def test_spot_only_pools_carry_a_spare_instance_and_skip_instances_without_a_spot_offer() -> None:
    """As the online planner: spot capacity can vanish, so each pool runs one instance more than serving
    needs (here one replica each), priced at spot; an instance with no spot offer is never planned as spot."""
    instances, curves = _hybrid_catalog()
    options = pair_options(instances, curves, ACCELERATORS)  # type: ignore[arg-type]
    od = plan_fleet(options, _target(150, 40), [(1, 0.95), (32, 0.05)])
    assert od.split is None or not any("spare" in n for n in od.split[1].notes)

    def spot_plan(a100_spot: float | None) -> object:
        a100 = instance("p.a100", 3.67, vcpus=12, ram_gib=85, acc="A100-80GB", count=1, spot=a100_spot)
        spot_instances = [instance("c.2x", 0.34, vcpus=8, ram_gib=16, spot=0.12), a100]
        spot_options = pair_options(spot_instances, curves, ACCELERATORS)  # type: ignore[arg-type]
        return plan_fleet(spot_options, _target(150, 40), [(1, 0.95), (32, 0.05)], purchase=("spot",))

    spot = spot_plan(1.5)
    assert od.split is not None and spot.split is not None  # type: ignore[attr-defined]
    for pool, od_pool, price in zip(spot.split[1:], od.split[1:], (0.12, 1.5), strict=True):  # type: ignore[attr-defined]
        assert pool.purchase == "spot" and pool.replicas == od_pool.replicas + 1
        assert any("spare instance" in n for n in pool.notes) and not any("spare" in n for n in od_pool.notes)
        assert pool.cost_usd_per_hour == pytest.approx(pool.count * price)
    # No spot offer on the A100: only the CPU is planned as spot, and it cannot serve 32-sample requests in 40 ms.
    assert spot_plan(None).choice == "none"  # type: ignore[attr-defined]


def test_a_spec_with_a_request_mix_plans_every_row_for_the_mix_and_adds_the_fleet() -> None:
    import json

    from plan_fixtures import small_catalog

    from rightsize.plan import plan
    from rightsize.spec import parse_spec

    mix = [{"samples": 1, "share": 0.9}, {"samples": 16, "share": 0.1}]
    online = {"rate_per_s": 20, "latency": {"percentile": 95, "bound_ms": 300}, "request_mix": mix}
    w = parse_spec({"model": "distilbert", "targets": {"online": online}})
    curves = [cpu_curve("c.2x", 10.0, 8.0), cpu_curve("c.4x", 6.0, 4.0), gpu_curve("T4", 6.0, 0.3)]
    r = plan(w, curves, small_catalog())
    assert r.recommendation is not None and r.fleet is not None
    assert all(c.latency is None or "request sizes" in c.latency.method for c in r.candidates)
    one = r.fleet["single"]
    assert one is not None and (one["instance"], one["precision"]) == (
        r.recommendation.instance,
        r.recommendation.precision,
    )
    assert one["cost_usd_per_hour"] == pytest.approx(r.recommendation.cost_usd_per_hour)
    # a mix's rows are online serving rows: their units are replicas (kind_hint had been "", read "instance")
    assert {c.kind_hint for c in r.candidates} == {"online"} and " replica" in r.why[0]
    d = json.loads(json.dumps(r.to_dict(top=3), allow_nan=False))
    assert d["fleet"]["mix"] == [{"samples": 1, "share": 0.9}, {"samples": 16, "share": 0.1}]
    # every pool carries its energy, per 1M of the requests it serves (they were null)
    pools = [d["fleet"]["single"], *([d["fleet"]["split"]["small"], d["fleet"]["split"]["large"]]
                                     if d["fleet"]["split"] else [])]  # fmt: skip
    assert all(p["energy"] is not None and p["energy"]["basis"] == "per 1M requests" for p in pools)
    if d["fleet"]["split"]:
        large = d["fleet"]["split"]["large"]["energy"]  # 10% of the requests: per 1M of them, 10x its kWh per hour
        assert large["kwh"] == pytest.approx(large["kwh_per_hour"] / (20 * 0.1 * 3600) * 1e6, rel=0.01)


def test_a_bad_request_mix_is_a_one_line_spec_error() -> None:
    from rightsize.errors import SpecError
    from rightsize.spec import parse_spec

    online = {"rate_per_s": 20, "latency": {"bound_ms": 300}, "request_mix": [{"samples": 1, "share": 0.5}]}
    # named as the field, not the section, and without the section's dict dumped after it
    with pytest.raises(SpecError, match=r"^targets.online.request_mix: shares add up to 0.5; make them add up to 1$"):
        parse_spec({"model": "distilbert", "targets": {"online": online}})


def test_the_report_shows_the_request_mix_in_html_and_markdown() -> None:
    from plan_fixtures import small_catalog

    from rightsize.plan import plan
    from rightsize.report import build_report_data, render_markdown
    from rightsize.report.html import render_html
    from rightsize.spec import parse_spec

    mix = [{"samples": 1, "share": 0.9}, {"samples": 16, "share": 0.1}]
    online = {"rate_per_s": 20, "latency": {"percentile": 95, "bound_ms": 300}, "request_mix": mix}
    w = parse_spec({"model": "distilbert", "targets": {"online": online}})
    r = plan(w, [cpu_curve("c.2x", 10.0, 8.0), gpu_curve("T4", 6.0, 0.3)], small_catalog())
    data = build_report_data(r.to_dict())  # a stored plan renders the same
    md = render_markdown(data)
    assert "## Request mix (90% x 1, 10% x 16 samples): " in md
    assert "| one pool | all |" in md and "| size split | \\< 16 samples |" in md
    page = render_html(data)
    assert '<section class="fleet">' in page and "<td>&gt;= 16 samples</td>" in page


def test_the_fleet_notes_say_how_many_replicas_run_on_how_many_instances() -> None:
    """'4 x c.2x' read as four VMs where one VM ran four worker processes; two clouds behind one router say so."""
    import dataclasses

    instances, curves = _hybrid_catalog()
    instances = [instances[0], dataclasses.replace(instances[1], provider="gcp")]  # type: ignore[call-overload]
    curves = [dataclasses.replace(curves[0], workers=4), curves[1]]  # type: ignore[call-overload]
    plan = plan_fleet(pair_options(instances, curves, ACCELERATORS), _target(400, 40), [(1, 0.95), (32, 0.05)])  # type: ignore[arg-type]
    assert plan.split is not None
    _, small, large = plan.split
    note = next(n for n in plan.notes if n.startswith("split at"))
    assert f"{small.replicas} replicas on {small.count} x c.2x (cpu) for smaller requests" in note
    assert f"{large.count} x p.a100 (A100-80GB) for the rest" in note and small.count < small.replicas
    assert "two clouds: aws and gcp behind one router" in note


def test_the_fleet_breaks_a_price_tie_as_the_planners_table_does() -> None:
    """The spec listed fp32; the table recommended the fp32 T4 and the Request mix section the fp16 one at the
    same price (its own tie-break: faster alone)."""
    instances = (instance("g.t4", 0.53, vcpus=4, ram_gib=16, acc="T4", count=1),)
    curves = [gpu_curve("T4", 6.0, 0.4, precision="fp32"), gpu_curve("T4", 3.0, 0.2, precision="fp16")]
    options = pair_options(instances, curves, ACCELERATORS)  # type: ignore[arg-type]
    mix = [(1, 0.95), (32, 0.05)]
    assert plan_fleet(options, _target(20, 250), mix).single.precision == "fp16"  # type: ignore[union-attr]
    listed = plan_fleet(options, _target(20, 250), mix, listed=["fp32"])
    assert listed.single is not None and listed.single.precision == "fp32"


def test_a_mix_rows_cheapest_projected_pool_carries_its_band() -> None:
    """A request-mix plan printed no latency band: the online planner's band step never ran on the mix's rows."""
    from rightsize.plan.fleet import plan_mixed_single

    instances, curves = _hybrid_catalog()
    options = pair_options(instances, curves, ACCELERATORS)  # type: ignore[arg-type]
    target = _target(50, 200, request_mix=[{"samples": 1, "share": 0.9}, {"samples": 8, "share": 0.1}])
    rows = plan_mixed_single(options, target)
    feasible = sorted((c for c in rows if c.feasible), key=lambda c: c.cost_usd_per_hour)
    gpu = next(c for c in feasible if c.device_class == "gpu")
    cpu = next(c for c in feasible if c.device_class == "cpu")
    assert feasible[0] is cpu and cpu.latency is not None and cpu.latency.band_ms is None  # a measured curve: none
    if gpu.cost_usd_per_hour > cpu.cost_usd_per_hour:  # only the lowest price gets one, as in plan_online
        assert gpu.latency is not None and gpu.latency.band_ms is None
    gpu_only = plan_mixed_single([o for o in options if o.instance.accelerator], target)
    row = next(c for c in gpu_only if c.feasible)
    assert row.latency is not None and row.latency.band_ms is not None
    lo, hi = row.latency.band_ms
    at = row.latency.p_target_ms or row.latency.p95
    assert hi == at  # sized at the slow edge (x1.25): the prediction is the band's slow end
    assert lo < 0.9 * at  # the fast edge (x0.8/1.25 of the sized times) is well below it


def test_on_a_full_tie_the_fleets_one_pool_is_the_tables_first_row() -> None:
    """mixed-sizes at 400/s: the table recommended fp16 g5.xlarge and the Request mix section bf16 g5.xlarge, tied
    on every key: the fleet replaced its best with each later tied row, the table keeps the first."""
    import dataclasses

    from rightsize.plan.explain import rank
    from rightsize.plan.fleet import plan_mixed_single

    instances = (instance("g.t4", 0.53, vcpus=4, ram_gib=16, acc="T4", count=1),)
    options = pair_options(instances, [gpu_curve("T4", 3.0, 0.2, precision="fp16")], ACCELERATORS)  # type: ignore[arg-type]
    mix = [(1, 0.95), (32, 0.05)]
    target = _target(20, 250, request_mix=[{"samples": s, "share": p} for s, p in mix])
    (first,) = [c for c in plan_mixed_single(options, target) if c.feasible]
    twin = dataclasses.replace(first, precision="bf16")
    plan = plan_fleet(options, target, mix, singles=[first, twin], listed=["fp16", "bf16"])
    assert plan.single is first is rank([first, twin], "online", ["fp16", "bf16"])[0]


def test_a_mix_refused_by_its_budget_says_budget_not_slo() -> None:
    """A $0.50/h budget against a T4 pool that meets the SLO at $0.53/h printed "no single pool and no size split
    meets the SLO for this mix"."""
    from rightsize.plan.fleet import plan_mixed_single

    instances = (instance("g.t4", 0.53, vcpus=4, ram_gib=16, acc="T4", count=1),)
    options = pair_options(instances, [gpu_curve("T4", 3.0, 0.2, precision="fp16")], ACCELERATORS)  # type: ignore[arg-type]
    mix = [(1, 0.95), (32, 0.05)]
    target = _target(20, 250, request_mix=[{"samples": s, "share": p} for s, p in mix], budget_usd_per_hour=0.5)
    rows = plan_mixed_single(options, target)
    plan = plan_fleet(options, target, mix, singles=rows)
    assert plan.choice == "none"
    assert plan.notes[-1].startswith("nothing meets the SLO within the $0.5/h budget: the cheapest single pool costs "
                                     "$0.53/h")  # fmt: skip


def test_a_multi_gpu_instance_in_a_mix_serves_with_every_gpu() -> None:
    """One replica needed on an 8-GPU instance, spot: the row read "9 on 2" (1 serving + an 8-GPU spare), where every
    instance bought serves, as the online planner fills them: 16 on 2."""
    from rightsize.plan.fleet import plan_mixed_single

    eight = instance("p.8x", 20.4, vcpus=96, ram_gib=1152, acc="A100-80GB", count=8, spot=10.2)
    options = pair_options([eight], [gpu_curve("A100-80GB", 3.0, 0.1)], ACCELERATORS)  # type: ignore[arg-type]
    mix = [{"samples": 1, "share": 0.95}, {"samples": 32, "share": 0.05}]
    for buy, replicas, count in ((("on_demand",), 8, 1), (("spot",), 16, 2)):
        (row,) = [c for c in plan_mixed_single(options, _target(20, 250, request_mix=mix), buy) if c.feasible]
        assert (row.replicas, row.count) == (replicas, count)


def _tied_mix_plan(monkeypatch: pytest.MonkeyPatch, n: int) -> tuple[int, list[object], object]:
    """Plan a mix over the hybrid catalog plus ``n`` CPU rows of one size and price, each with its own projected
    curve of equal numbers (what the projection builds per catalog row): (runs simulated, the table's rows, the
    fleet plan), the table's rows and the plan as comparable tuples."""
    import dataclasses

    import rightsize.plan.fleet as fleet

    instances, curves = _hybrid_catalog()
    rows = [instance(f"zz{i:02d}.large", 0.05, vcpus=2, ram_gib=4) for i in range(n)]
    tied = [dataclasses.replace(cpu_curve(f"zz{i:02d}.large", 4.0, 1.0), provenance="projected", band_lo=0.8,
                                band_hi=1.25, source=f"projected onto zz{i:02d}.large") for i in range(n)]  # fmt: skip
    runs = [0]
    run = fleet.run_sized

    def counted(*a, **kw):  # type: ignore[no-untyped-def]
        runs[0] += 1
        return run(*a, **kw)

    monkeypatch.setattr(fleet, "run_sized", counted)
    options = pair_options([*instances, *rows], [*curves, *tied], ACCELERATORS)  # type: ignore[arg-type]
    mix = [(1, 0.95), (32, 0.05)]
    target = _target(60, 250, request_mix=[{"samples": s, "share": p} for s, p in mix])
    table = fleet.plan_mixed_single(options, target)
    plan = fleet.plan_fleet(options, target, mix, singles=table)
    alone = fleet.plan_fleet(options, target, mix)  # the single pool by branch and bound, not from the table

    def row(c: Candidate | None) -> object:
        return None if c is None else (c.instance, c.feasible, c.replicas, c.count, c.cost_usd_per_hour, c.batching,
                                       c.latency, tuple(c.reasons))  # fmt: skip

    def picked(p: FleetPlan) -> object:
        split = None if p.split is None else (p.split[0], row(p.split[1]), row(p.split[2]))
        return p.choice, row(p.single), split, p.notes

    return runs[0], [row(c) for c in table], (picked(plan), picked(alone))


def test_a_mix_simulates_rows_of_one_size_and_price_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A catalog of 100 CPU rows of one size and price took 27 s to plan a request mix (0.2 s for one row): the mix's
    table, its pools and its bands simulated each row's curve (equal numbers, its own instance name) on its own. Rows
    that simulate alike (``sim.sim_key``) now share one run, and each row still reads as the lone row did."""
    runs_1, table_1, plan_1 = _tied_mix_plan(monkeypatch, 1)
    runs_n, table_n, plan_n = _tied_mix_plan(monkeypatch, 50)
    assert runs_n == runs_1, (runs_1, runs_n)
    assert plan_n == plan_1
    lone = next(r for r in table_1 if r[0] == "zz00.large")  # type: ignore[index]
    rows = [r for r in table_n if r[0].startswith("zz")]  # type: ignore[index]
    assert [r[0] for r in rows] == [f"zz{i:02d}.large" for i in range(50)]  # type: ignore[index]
    assert all(r[1:] == lone[1:] for r in rows)  # type: ignore[index]
    assert lone[1] and lone[6].band_ms is not None  # type: ignore[index]  # feasible, banded: every step ran
    assert [r for r in table_n if not r[0].startswith("zz")] == [r for r in table_1 if r[0] != "zz00.large"]  # type: ignore[index]


def test_a_pool_is_sized_at_a_smaller_batch_when_it_needs_fewer_replicas() -> None:
    """mobilenet_v2 fp32 on a 2-vCPU c7a.large as measured here (t(8) read on a busy machine, cv 1.85): 38 one-sample
    requests/s under a 250 ms p95. The largest batch under half the SLO, 8, needed 2 replicas; batch 1 meets it on
    one (rho 0.675): the Request mix section had printed "2 x c7a.large (cpu, fp32), batch 8" for that pool."""
    from rightsize.profile import ServiceCurve

    lat, cv = (17.76, 114.04, 651.76), (0.034, 1.85, 0.79)
    curve = ServiceCurve("cpu:c7a.large", "fp32", (1, 8, 32), lat, cv, "measured", instance="c7a.large")
    options = pair_options([instance("c7a.large", 0.1025, vcpus=2, ram_gib=4)], [curve], ACCELERATORS)
    single = plan_fleet(options, _target(38, 250), [(1, 1.0)]).single
    assert single is not None and single.batching is not None and single.latency is not None
    assert (single.replicas, single.count, single.batching.max_batch) == (1, 1, 1)
    assert single.cost_usd_per_hour == pytest.approx(0.1025)
    assert single.latency.p95 <= 250
