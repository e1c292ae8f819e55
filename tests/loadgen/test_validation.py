"""Predicted vs measured: the local curve from a profile, capacity, errors, and a served known curve."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest

from rightsize.loadgen.validation import (
    ValidationPoint,
    capacity_per_s,
    error_pct,
    render_points,
)
from rightsize.profile import Latency, Measurement, Profile, ServiceCurve, measured_curve


def _m(batch: int, p50: float, threads: int | None = None, precision: str = "fp32", ok: bool = True) -> Measurement:
    stats = Latency(p50=p50, p95=p50 * 1.1, p99=p50 * 1.2, mean=p50, std=p50 * 0.1, n=20)
    return Measurement(
        model="m", mode="inference", device="cpu", precision=precision, batch_size=batch, threads=threads,
        input={}, status="ok" if ok else "failed", latency_ms=stats if ok else None,
    )  # fmt: skip


def test_local_curve_prefers_all_cores_and_skips_failures() -> None:
    profile = Profile(
        "m", "inference", {}, {"id": "env1"},
        (_m(1, 5.0), _m(1, 9.0, threads=1), _m(8, 20.0), _m(8, 30.0, threads=1), _m(4, 1.0, precision="int8"),
         _m(16, 0.0, ok=False)),
    )  # fmt: skip
    curve = measured_curve(profile, "fp32")
    assert curve is not None
    assert curve.batch_sizes == (1, 8) and curve.latency_ms == (5.0, 20.0)
    assert curve.cv == pytest.approx((0.1, 0.1)) and curve.provenance == "measured"
    assert measured_curve(profile, "bf16") is None
    one = measured_curve(profile, "fp32", threads=1)  # a server pinned to one core
    assert one is not None and one.latency_ms == (9.0, 30.0)
    assert measured_curve(profile, "fp32", threads=3) is None


def test_capacity_is_the_best_whole_request_batch() -> None:
    curve = ServiceCurve("cpu", "fp32", (1, 8), (10.0, 24.0), (0.0, 0.0), "measured")  # t(b) = 8 + 2b
    assert capacity_per_s(curve, max_batch=1) == pytest.approx(100.0)
    assert capacity_per_s(curve, max_batch=8) == pytest.approx(8 * 1000 / 24)
    assert capacity_per_s(curve, max_batch=8, request_samples=4) == pytest.approx(2 * 1000 / 24)


def test_slow_levels_run_longer_within_a_bound() -> None:
    from rightsize.workflows.validate_run import level_duration_s

    assert level_duration_s(100.0, 10.0) == 10.0  # 1000 requests: enough
    assert level_duration_s(10.0, 10.0) == 20.0  # stretched to 200 requests
    assert level_duration_s(1.0, 10.0) == 60.0  # at most 6x


def test_errors_and_table() -> None:
    assert error_pct(12.0, 10.0) == pytest.approx(20.0) and error_pct(8.0, 10.0) == pytest.approx(-20.0)
    point = ValidationPoint("50%", 40.0, 0.5, Latency(10, 20, 30), Latency(11, 25, 30), 2.0)
    assert point.error_pct == pytest.approx({"p50": 10.0, "p95": 25.0, "p99": 0.0})
    table = render_points([point, ValidationPoint("80%", 64.0, 0.8, Latency(10, 20, 30), None, 3.0)])
    assert "+25%" in table and "80%" in table.splitlines()[2]
    assert "pred and err:" not in table  # one prediction: nothing to tell apart
    both = dataclasses.replace(point, predicted_now_ms=Latency(10, 22, 30), predicted_served_ms=Latency(11, 24, 30))
    table = render_points([both])
    assert "| re-timed: pred p95 22.00, err +14%" in table and "| served t: pred p95 24.00, err +4%" in table
    legend = table.splitlines()[-1]
    assert legend.startswith("pred and err: the plan's model (the profile it planned from) at this server's layout")
    assert "re-timed:" in legend and "served t:" in legend


def others_busy(share: float) -> Any:
    """A stand-in for ``OthersBusy`` that finds other processes kept ``share`` of the cores busy during every run."""

    class Fixed:
        def __init__(self, also: Any = ()) -> None:
            self.share = share

        def __enter__(self) -> Fixed:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

    return Fixed


@pytest.mark.slow
def test_validate_config_matches_the_simulator_on_a_known_curve() -> None:
    """Serve a model whose batch time is known exactly (a sleep), so prediction and measurement
    differ only by what the planner leaves out (HTTP, JSON, hand-offs: a few ms here)."""
    from rightsize.cpus import split_cpus
    from rightsize.serve import ServerConfig
    from rightsize.workflows.validate_run import validate_config

    def t_ms(b: int) -> float:
        return 20.0 + 10.0 * b

    def predict(x: Any) -> Any:
        time.sleep(t_ms(len(x)) / 1000)
        return x[:, :1]

    sizes = tuple(range(1, 9))
    curve = ServiceCurve("cpu:fake", "fp32", sizes, tuple(t_ms(b) for b in sizes), (0.0,) * 8, "measured")
    cap = capacity_per_s(curve, 8)  # 8 / 100 ms = 80/s
    config = ServerConfig(
        model="fake", predict=predict, sample_shape=(4,), max_batch=8, max_wait_ms=5.0, workers=1,
        port=0, queue_size=1024, warmup=False,
    )  # fmt: skip
    loads = [("50%", 0.5 * cap), ("80%", 0.8 * cap)]
    slower = ServiceCurve("cpu:fake", "fp32", sizes, tuple(1.2 * t_ms(b) for b in sizes), (0.0,) * 8, "measured")
    points = validate_config(
        config, curve, loads, duration_s=2.5, warmup_s=0.5, min_requests=0, cpus=split_cpus(), now_curve=slower
    )
    assert [p.label for p in points] == ["50%", "80%"]
    for p in points:
        assert p.measured_ms is not None, p.notes
        assert p.predicted_now_ms is not None and p.predicted_now_ms.p95 > p.predicted_ms.p95  # a 20% slower curve
        assert p.achieved_rate_per_s == pytest.approx(p.rate_per_s, rel=0.05)
        assert p.error_fraction == 0.0
        # The server's /metrics during the level: batches formed, and model time matching the known t(b).
        assert p.served_mean_batch is not None and p.served_mean_batch > 1.0
        # Loose: on 2 shared cores a worker thread wakes late from its sleep (seen +45% in a CI run).
        assert p.served_batch_ms == pytest.approx(p.curve_batch_ms, rel=0.5)
    # A level whose generator fell behind (another job took the CPU) measured the machine, not the
    # server; judge accuracy on the levels it kept up with, and skip when it kept up with none.
    # More load, longer batches and queues: the prediction's p95 grows (and the measurement's, below).
    assert points[1].predicted_ms.p95 > points[0].predicted_ms.p95
    kept_up = [p for p in points if p.valid]
    if not kept_up:
        pytest.skip("the generator fell behind at every level: this machine is overloaded")
    # A 2.5 s level's p95 rests on ~5 requests: one host stall on the server's core (this VM stalls
    # processes for 10-700 ms at random; seen +65% at 50% with +2% at 80% in one CI run) moves it. So
    # every level must be roughly right and the better level close.
    p95_errors = []
    for p in kept_up:
        assert p.error_pct["p50"] is not None and abs(p.error_pct["p50"]) < 40, render_points(points)
        assert p.error_pct["p95"] is not None and abs(p.error_pct["p95"]) < 100, render_points(points)
        p95_errors.append(abs(p.error_pct["p95"]))
    assert min(p95_errors) < 35, render_points(points)
    if len(kept_up) == 2:  # a stalled level's p95 measures the stall, not the load
        assert points[1].measured_ms is not None and points[0].measured_ms is not None
        assert points[1].measured_ms.p95 > points[0].measured_ms.p95


@pytest.mark.slow
def test_levels_follow_the_servers_own_capacity_when_it_is_slower_than_its_curve(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server whose batches take 1.6x the curve's t(b) meets "50%" of the curve's capacity at 80% of its
    own: validate measures it under a short overload and scales the fraction levels to what it really does."""
    from rightsize.cpus import split_cpus
    from rightsize.serve import ServerConfig
    from rightsize.workflows import validate_run
    from rightsize.workflows.validate_run import validate_config

    # this server is slow by its own sleeps: a busy test machine must not make validate doubt that
    monkeypatch.setattr(validate_run, "OthersBusy", others_busy(0.0))

    def t_ms(b: int) -> float:
        return 10.0 + 5.0 * b

    def predict(x: Any) -> Any:
        time.sleep(1.6 * t_ms(len(x)) / 1000)
        return x[:, :1]

    sizes = tuple(range(1, 9))
    curve = ServiceCurve("cpu:fake", "fp32", sizes, tuple(t_ms(b) for b in sizes), (0.0,) * 8, "measured")
    cap = capacity_per_s(curve, 8)  # 8 / 50 ms = 160/s; the server does ~100/s
    config = ServerConfig(
        model="fake", predict=predict, sample_shape=(4,), max_batch=8, max_wait_ms=2.0, workers=1,
        port=0, queue_size=1024, warmup=False,
    )  # fmt: skip
    points = validate_config(
        config, curve, [], duration_s=1.5, warmup_s=0.3, min_requests=0, cpus=split_cpus(), fractions=(0.5,)
    )
    [p] = points
    assert p.label == "50%" and p.capacity_per_s is not None
    assert p.capacity_per_s == pytest.approx(cap / 1.6, rel=0.25), render_points(points)
    assert p.rate_per_s == pytest.approx(0.5 * p.capacity_per_s)
    assert any("its own capacity" in n for n in p.notes), p.notes
    # The served-time prediction sees the slower batches the server had during the level.
    assert p.served_batch_ms is not None and p.curve_batch_ms is not None
    assert p.served_batch_ms > 1.2 * p.curve_batch_ms


def test_split_cpus_and_pinning_restore_every_thread() -> None:
    import os

    from rightsize.cpus import pinned, split_cpus

    split = split_cpus()
    before = os.sched_getaffinity(0)
    if len(before) < 2:
        assert split is None
        return
    assert split is not None and not split.generator & split.server
    assert split.generator | split.server == before and len(split.generator) == 1
    seen: list[set[int]] = []
    with pinned(split.server):
        import threading

        t = threading.Thread(target=lambda: seen.append(os.sched_getaffinity(0)))
        t.start()
        t.join()
        assert os.sched_getaffinity(0) == split.server
    assert seen == [set(split.server)]  # threads started inside inherit the mask
    assert os.sched_getaffinity(0) == before


@pytest.mark.slow
def test_retime_curve_times_the_served_configuration() -> None:
    from rightsize.spec.schema import Workload
    from rightsize.workflows.validate import retime_curve

    w = Workload.model_validate({"model": "simplenet", "tiny": True, "timing": {"max_time_s": 0.5}})
    curve = retime_curve(w, "fp32", (1, 4), threads=1, cpus=None)
    assert curve is not None and curve.batch_sizes == (1, 4) and curve.provenance == "measured"
    assert all(t > 0 for t in curve.latency_ms) and curve.device == "cpu:now"


def test_a_level_with_refused_requests_is_not_compared() -> None:
    """Latency over the answered requests only flatters a server that refused the rest (503s)."""
    kept = ValidationPoint("80%", 70.0, 0.8, Latency(10, 86, 120), Latency(17, 27, 40), 1.0, error_fraction=0.24)
    clean = ValidationPoint("80%", 70.0, 0.8, Latency(10, 86, 120), Latency(20, 106, 150), 1.0, error_fraction=0.0)
    assert not kept.comparable and clean.comparable
    assert "not comparable" in render_points([kept]) and "not comparable" not in render_points([clean])


def test_the_served_time_prediction_is_shown_and_round_trips() -> None:
    p = ValidationPoint("80%", 70.0, 0.8, Latency(10, 86, 120), Latency(20, 98, 150), 1.0,
                        predicted_served_ms=Latency(19, 97, 140))  # fmt: skip
    assert "served t: pred p95 97.00, err +1%" in render_points([p])
    back = ValidationPoint.from_dict(p.to_dict())
    assert back.predicted_served_ms == p.predicted_served_ms
    assert back.error_served_pct["p95"] == p.error_served_pct["p95"]


def test_latency_shifted_moves_every_value() -> None:
    lat = Latency(10, 20, 30, mean=12, std=4, n=9, p90=18, others={75.0: 15})
    moved = lat.shifted(2.5)
    assert (moved.p50, moved.p95, moved.p99, moved.mean, moved.p90) == (12.5, 22.5, 32.5, 14.5, 20.5)
    assert moved.others == {75.0: 17.5} and moved.std == 4 and moved.n == 9 and moved.max is None


def test_serving_cpu_is_the_process_cpu_the_model_did_not_use() -> None:
    from rightsize.loadgen.validation import Served, serving_cpu_ms

    before = Served(10, [], cpu_s=100.0)
    # 20 requests of 2 samples in 10 batches of 4 samples, 12 ms of model time each, 1 thread: 120 ms of
    # model CPU out of 150 ms -> 30 ms over 20 requests.
    after = Served(20, [(4, 12.0, 12.5)] * 10, cpu_s=100.15)
    assert serving_cpu_ms(before, after, threads=1, request_samples=2) == pytest.approx(1.5)
    assert serving_cpu_ms(before, after, threads=2, request_samples=2) == 0.0  # never negative
    assert serving_cpu_ms(Served(10, [], None), after, threads=1, request_samples=2) is None


def test_a_mix_counts_the_requests_it_sent_not_the_batches_samples() -> None:
    """`validate` on a request mix computed the serving CPU with a copy of this formula: its requests differ in
    size, so the samples batched cannot count them; the probe's sent requests do (``requests``)."""
    from rightsize.loadgen.validation import Served, serving_cpu_ms

    before = Served(10, [], cpu_s=100.0)
    # 1-sample and 8-sample requests, 25 sent: 5 batches of 2 threads x 12 ms = 120 ms of model CPU out of 170 ms
    after = Served(15, [(9, 12.0, 12.5)] * 5, cpu_s=100.17)
    got = serving_cpu_ms(before, after, threads=2, request_samples=1, clamp=False, requests=25)
    assert got == ((100.17 - 100.0) * 1000.0 - 60.0 * 2) / 25  # validate_mix's own numbers, bit for bit
    assert got == pytest.approx(2.0)
    over = serving_cpu_ms(before, after, threads=4, request_samples=1, clamp=False, requests=25)
    assert over == pytest.approx((170.0 - 240.0) / 25)  # below zero, unclamped: the mix notes "read below zero"
    assert serving_cpu_ms(before, after, threads=1, request_samples=1, requests=0) == pytest.approx(110.0)  # 1 at least


def test_the_may_be_load_phrase_is_the_loadgen_layers() -> None:
    """validate_run spelt it as a constant and loadgen's report spelt it again: one constant, in the lower layer."""
    from rightsize.loadgen.validation import MAY_BE_LOAD, ValidationPoint
    from rightsize.workflows import validate_run

    assert validate_run.MAY_BE_LOAD is MAY_BE_LOAD == "it may be this machine's load, not the server's"
    assert validate_run.measured_busy("x", 0.83) == (
        f"x, measured while other processes kept 83% of this machine's cores busy: {MAY_BE_LOAD}"
    )
    point = ValidationPoint("50%", 40.0, 0.5, Latency(10, 20, 30), Latency(11, 25, 30), 2.0, overhead_ms=4.77)
    busy = dataclasses.replace(point, probe_busy="while busy")
    assert "measured first at a light load while busy (it may be this machine's load, not the server's); " in (
        render_points([busy])
    )


@pytest.mark.slow
def test_a_probe_and_an_overload_beside_other_work_are_flagged_not_trusted(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a busy machine the light-load probe and the overload ran without the busy check the levels have: a
    contended overload made the levels fractions of a capacity the server did not have, and the notes blamed it."""
    from rightsize.cpus import split_cpus
    from rightsize.serve import ServerConfig
    from rightsize.workflows import validate_run

    monkeypatch.setattr(validate_run, "OthersBusy", others_busy(0.83))  # other processes kept 83% of the cores busy

    def t_ms(b: int) -> float:
        return 10.0 + 5.0 * b

    def predict(x: Any) -> Any:
        time.sleep(1.6 * t_ms(len(x)) / 1000)  # slower than its curve, as a contended server is
        return x[:, :1]

    sizes = tuple(range(1, 9))
    curve = ServiceCurve("cpu:fake", "fp32", sizes, tuple(t_ms(b) for b in sizes), (0.0,) * 8, "measured")
    cap = capacity_per_s(curve, 8)
    config = ServerConfig(
        model="fake", predict=predict, sample_shape=(4,), max_batch=8, max_wait_ms=2.0, workers=1,
        port=0, queue_size=1024, warmup=False,
    )  # fmt: skip
    points = validate_run.validate_config(
        config, curve, [], duration_s=1.5, warmup_s=0.3, min_requests=0, cpus=split_cpus(), fractions=(0.5,)
    )
    [p] = points
    assert p.capacity_per_s == pytest.approx(cap) and p.rate_per_s == pytest.approx(0.5 * cap)  # not rescaled
    text = render_points(points)
    assert not p.valid and "other processes kept 83% of this machine's cores busy during this level" in text
    if p.overhead_ms:  # the probe's overhead is used, flagged
        assert any(n.startswith("the light-load probe's serving overhead (") for n in p.notes), p.notes
        assert "measured first at a light load while other processes kept 83%" in text
    kept = (", measured while other processes kept 83% of this machine's cores busy: it may be this machine's load, "
            f"not the server's; levels stay fractions of {cap:.1f}/s, not ")  # fmt: skip
    assert any(n.startswith("under overload the server's batches took +") and kept in n for n in p.notes), p.notes
    assert not any("its own capacity" in n for n in p.notes), p.notes
