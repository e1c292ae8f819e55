"""Reading the server's batch log during a validation: a busy server that misses one read is asked again."""

from __future__ import annotations

import dataclasses
import io
import json
import urllib.request
from typing import Any

import pytest

from rightsize.workflows import validate_run

LOG = {"fields": ["samples", "compute_ms", "busy_ms", "pool", "taken_ms"], "next": 2, "cpu_s": 1.5,
       "batches": [[1, 10.0, 11.0, "cpu", 0.1], [4, 30.0, 31.0, "cpu", 0.2]]}  # fmt: skip


class _Resp(io.BytesIO):
    def __enter__(self) -> _Resp:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _flaky(failures: int) -> tuple[Any, list[float]]:
    calls: list[float] = []

    def urlopen(req: Any, timeout: float) -> _Resp:
        calls.append(timeout)
        if len(calls) <= failures:
            raise TimeoutError("timed out")  # an OSError: a server too busy to answer in time
        return _Resp(json.dumps(LOG).encode())

    return urlopen, calls


def test_a_missed_read_is_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("time.sleep", lambda s: None)
    urlopen, calls = _flaky(failures=2)
    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    got = validate_run.served_batches("http://127.0.0.1:1", 0)
    assert got is not None and got.next == 2 and [n for n, _, _ in got.batches] == [1, 4] and len(calls) == 3
    urlopen, calls = _flaky(failures=5)
    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    assert validate_run.served_batches("http://127.0.0.1:1", 0) is None and len(calls) == 3  # gives up after 3


def _curve() -> Any:
    from rightsize.profile import ServiceCurve

    sizes = tuple(range(1, 9))
    return ServiceCurve("cpu:fake", "fp32", sizes, tuple(10.0 + 5.0 * b for b in sizes), (0.0,) * 8, "measured")


def test_a_contended_overload_does_not_rescale_the_levels() -> None:
    """Beside a CPU hog the overload run's batches took +56%, and validate made its levels fractions of 12.6/s, not
    20.5/s, blaming the server: the overload ran under no check of what else kept the cores busy."""
    curve = _curve()
    batches = [(8, 0.0, 1.6 * curve.t_ms(8))] * 10  # every batch 1.6x the curve's t(8)
    loads = [("planned", 60.0), ("high", 150.0)]
    quiet = validate_run.overload_capacity(batches, curve, 160.0, 160.0, loads, 0.05)
    assert quiet[0] == pytest.approx(100.0) and quiet[1] == [("planned", 60.0)]  # the server's own: 160 / 1.6
    assert quiet[2] == ("under overload the server's batches took +60% vs the curve's t(b): levels are fractions of "
                        "its own capacity, 100.0/s, not 160.0/s; high above it, not measured")  # fmt: skip
    capacity, kept, note = validate_run.overload_capacity(batches, curve, 160.0, 160.0, loads, 0.83)
    assert capacity == 160.0 and kept == loads
    assert note == ("under overload the server's batches took +60% vs the curve's t(b), measured while other "
                    "processes kept 83% of this machine's cores busy: it may be this machine's load, not the "
                    "server's; levels stay fractions of 160.0/s, not 100.0/s")  # fmt: skip
    assert validate_run.overload_capacity(batches, curve, 160.0, 160.0, loads, None)[0] == pytest.approx(100.0)
    on_time = [(8, 0.0, curve.t_ms(8))] * 10
    assert validate_run.overload_capacity(on_time, curve, 160.0, 160.0, loads, 0.83) == (160.0, loads, None)


def test_a_contended_probe_is_flagged_where_its_numbers_are_used() -> None:
    """The light-load probe set the overhead added to every prediction and printed 'stretch each batch by 0.00 ms of
    serving CPU' as a reading, when a busy machine had made its model calls outlast the server's CPU time."""
    from rightsize.loadgen.validation import Served, ValidationPoint, render_points, serving_cpu_ms
    from rightsize.profile import Latency

    assert validate_run.measured_busy("x", 0.2) is None and validate_run.measured_busy("x", None) is None
    assert validate_run.measured_busy("x", 0.83) == (
        "x, measured while other processes kept 83% of this machine's cores busy: it may be this machine's load, "
        "not the server's"
    )
    before, after = Served(10, [], cpu_s=100.0), Served(20, [(4, 12.0, 12.5)] * 10, cpu_s=100.15)
    assert serving_cpu_ms(before, after, threads=2, request_samples=2, clamp=False) == pytest.approx(-4.5)
    point = ValidationPoint("50%", 40.0, 0.5, Latency(10, 20, 30), Latency(11, 25, 30), 2.0, overhead_ms=4.77)
    measured = "measured first at a light load; the profile and re-timed ones also stretch each batch by 0.00 ms"
    assert render_points([point]).splitlines()[-1].endswith(f"{measured} of serving CPU per request")
    busy = dataclasses.replace(point, serving_cpu_clamped=True, probe_busy=validate_run.busy_while(0.83))
    assert render_points([busy]).splitlines()[-1] == (
        "predictions replay each level's own arrival schedule and add 4.77 ms per request of serving overhead (HTTP, "
        "JSON, hand-offs), measured first at a light load while other processes kept 83% of this machine's cores "
        "busy (it may be this machine's load, not the server's); the profile and re-timed ones stretch no batch by "
        "serving CPU: at the probe the model's time × threads exceeded the server's CPU time, so none was measured "
        "(the probe ran while other processes kept 83% of this machine's cores busy: model calls that wait for cores "
        "do that)"
    )
    assert "so none was measured" in render_points([dataclasses.replace(point, serving_cpu_clamped=True)])
