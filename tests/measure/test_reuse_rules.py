"""Which stored result a sweep keeps, reuses and judges rates by; which configs it measures at all (scripted runner)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rightsize.errors import SpecError
from rightsize.measure import config as config_mod
from rightsize.measure import sweep as sweep_mod
from rightsize.measure.config import BenchConfig, fit_threads
from rightsize.measure.quality import is_contended, measurement_quality
from rightsize.measure.sweep import run_sweep
from rightsize.profile import Latency, Measurement
from rightsize.spec import parse_spec
from rightsize.store import Store

MiB = 2**20


def _workload(**over: Any):  # type: ignore[no-untyped-def]
    return parse_spec({"model": "simplenet", "tiny": True, "batch_sizes": [1], "threads": [1]} | over)


class _Script:
    """A stand-in for ``run_isolated``: each call returns the next scripted (p50 ms, contention, GFLOP/s)."""

    def __init__(self, *results: tuple[float, float, float], peak: int = 10 * MiB) -> None:
        self.results, self.calls, self.peak = list(results), 0, peak

    def __call__(self, cfg: BenchConfig, *_: object, **__: object) -> Measurement:
        p50, contention, gflops = self.results[min(self.calls, len(self.results) - 1)]
        self.calls += 1
        if p50 <= 0:
            return cfg.result("failed", reason="out of memory: scripted")
        extra = {"contention": contention, "contended": contention > 0.15, "achieved_gflops": gflops,
                 "ci_converged": True}  # fmt: skip
        return cfg.result("ok", latency_ms=Latency(p50, p50, p50, p50, 0.0, 10), throughput_per_s=1e3 / p50,
                          flops_per_sample=1e6, peak_memory_bytes=self.peak, extra=extra)  # fmt: skip


def _sweep(monkeypatch: pytest.MonkeyPatch, store: Store | None, *results: tuple[float, float, float],
           w: Any = None, **kw: Any) -> tuple[sweep_mod.SweepResult, _Script]:  # fmt: skip
    script = _Script(*results, peak=kw.pop("peak", 10 * MiB))
    monkeypatch.setattr(sweep_mod, "run_isolated", script)
    return run_sweep(w or _workload(), store, **kw), script


def _p50(m: Measurement) -> float:
    assert m.latency_ms is not None
    return m.latency_ms.p50


def test_a_busy_remeasurement_never_replaces_a_clean_result(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The audit: clean 32.6 ms; `bench --fresh` beside two hogs read 157 ms (0.21x best GFLOP/s) and was stored
    over it; the next sweep then had no GFLOP/s reference, read 535.9 ms, estimated it 2.0x slow and kept it."""
    store = Store(tmp_path / "s.sqlite")
    clean, _ = _sweep(monkeypatch, store, (32.6, 0.01, 10.0))
    assert not is_contended(clean.measurements[0])
    fresh, script = _sweep(monkeypatch, store, (157.0, 0.53, 2.1), fresh=True)
    assert script.calls == 3  # measured (and retried) as asked, then the clean result kept
    [m] = fresh.measurements
    assert _p50(m) == 32.6 and fresh.reused == 1 and fresh.run_id is None
    assert any("read no better while the machine was busy; kept the stored result" in n for n in fresh.notes)
    again, script = _sweep(monkeypatch, store, (535.9, 0.51, 0.6))  # the plan under hogs: reuses, measures nothing
    assert script.calls == 0 and _p50(again.measurements[0]) == 32.6
    assert not measurement_quality(again.measurements).problems
    # Quiet again: --fresh measures and a clean result replaces the stored one.
    quiet, _ = _sweep(monkeypatch, store, (30.0, 0.01, 11.0), fresh=True)
    assert _p50(quiet.measurements[0]) == 30.0 and quiet.reused == 0


def test_a_busy_remeasurement_never_replaces_a_busy_result_with_a_slower_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    store = Store(tmp_path / "s.sqlite")
    first, _ = _sweep(monkeypatch, store, (157.0, 0.53, 2.1))
    assert is_contended(first.measurements[0])
    # Slower, but its estimate (1 / (1 - 0.51) = 2.0x, no reference) reads smaller than the stored one's (2.1x).
    slower, script = _sweep(monkeypatch, store, (535.9, 0.51, 0.6))
    assert script.calls == 3 and slower.reused == 1 and _p50(slower.measurements[0]) == 157.0
    faster, _ = _sweep(monkeypatch, store, (90.0, 0.6, 3.0))  # busier by the run queue, yet faster: the nearer
    assert faster.reused == 0 and _p50(faster.measurements[0]) == 90.0


def test_the_clean_stored_result_stays_the_rate_reference(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A store that already holds a busy result newer than a clean one (written before the fix): --fresh still
    judges the new timing against the clean one's GFLOP/s, so its slowdown estimate is the real one."""
    store = Store(tmp_path / "s.sqlite")
    _sweep(monkeypatch, store, (32.6, 0.01, 10.0))
    (cfg,), _ = config_mod.expand(_workload(), "features", env_id=store.envs()[0].id, has_cuda=False)
    busy = _Script((157.0, 0.53, 2.1))(cfg)
    store.add_measurements(store.start_run("bench"), [busy])
    refs: list[float | None] = []
    measure = sweep_mod.measure_config

    def spy(cfg: BenchConfig, *a: Any, best_gflops: float | None = None, **k: Any) -> Measurement:
        refs.append(best_gflops)
        return measure(cfg, *a, best_gflops=best_gflops, **k)

    monkeypatch.setattr(sweep_mod, "measure_config", spy)
    res, _ = _sweep(monkeypatch, store, (160.0, 0.5, 2.0), fresh=True, env=store.envs()[0])
    assert refs == [10.0] and _p50(res.measurements[0]) == 32.6


def test_the_measuring_line_says_why_a_stored_config_is_measured_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    store = Store(tmp_path / "s.sqlite")
    w = _workload(batch_sizes=[1, 2])
    _sweep(monkeypatch, store, (1.0, 0.01, 10.0), w=w)
    capfd.readouterr()
    _sweep(monkeypatch, store, (1.0, 0.01, 10.0), w=w, fresh=True)
    assert "measuring 2 config(s) on this machine (2 again: --fresh)\n" in capfd.readouterr().err
    busy = Store(tmp_path / "busy.sqlite")
    _sweep(monkeypatch, busy, (1.0, 0.5, 10.0), w=w)
    capfd.readouterr()
    _sweep(monkeypatch, busy, (1.0, 0.5, 10.0), w=w)
    assert "(2 again: stored while the machine was busy)" in capfd.readouterr().err


def test_a_busy_result_is_reused_while_the_machine_is_still_busy(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A plan run twice on a shared box re-measured every busy config (8 minutes) and read new numbers each time:
    while other work still holds the cores the stored reading is kept, once, with one note; quiet again, or with
    --fresh, it is measured."""
    store = Store(tmp_path / "s.sqlite")
    w = _workload(batch_sizes=[1, 2])
    _sweep(monkeypatch, store, (1.0, 0.5, 10.0), w=w)  # both stored contended
    monkeypatch.setattr(sweep_mod, "busy_now", lambda: 0.67)
    capfd.readouterr()
    kept, script = _sweep(monkeypatch, store, (1.0, 0.01, 10.0), w=w)
    assert script.calls == 0 and kept.reused == 2 and "measuring" not in capfd.readouterr().err
    assert kept.notes == [
        "2 config(s) stored while the machine was busy, and other work holds 67% of its cores now: "
        "reused, not measured again (`rightsize bench SPEC --fresh` measures them when it is quiet)"
    ]
    assert kept.busy_notes == kept.notes  # what `plan` prints (measure/profile_source.ensure_profile): it had not
    monkeypatch.setattr(sweep_mod, "busy_now", lambda: 0.05)
    quiet, script = _sweep(monkeypatch, store, (1.0, 0.01, 10.0), w=_workload(batch_sizes=[1, 2, 4]))
    assert script.calls == 3 and quiet.reused == 0
    err = capfd.readouterr().err
    assert "measuring 3 config(s) on this machine (2 again: stored while the machine was busy)" in err
    again, _ = _sweep(monkeypatch, store, (1.0, 0.01, 10.0), w=_workload(batch_sizes=[1, 2, 4, 8]))
    assert again.reused == 3 and "measuring 1 of 4 config(s) on this machine\n" in capfd.readouterr().err
    assert not any(is_contended(m) for m in quiet.measurements)


def test_a_stored_peak_above_the_memory_limit_is_measured_again_under_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    store = Store(tmp_path / "s.sqlite")
    _sweep(monkeypatch, store, (1.0, 0.01, 10.0), peak=283 * MiB)
    capfd.readouterr()
    under, script = _sweep(monkeypatch, store, (0.0, 0.0, 0.0), memory_limit_bytes=100 * MiB)  # fails there
    assert script.calls == 1 and under.reused == 0 and under.measurements[0].status == "failed"
    assert "(1 again: stored peak above --memory-limit)" in capfd.readouterr().err
    roomy, script = _sweep(monkeypatch, store, (1.0, 0.01, 10.0), memory_limit_bytes=1024 * MiB)
    assert script.calls == 0 and roomy.reused == 1 and roomy.measurements[0].status == "ok"
    again, script = _sweep(monkeypatch, store, (1.0, 0.01, 10.0))  # no cap: the capped failure hides nothing
    assert script.calls == 0 and again.reused == 1 and again.measurements[0].status == "ok"
    (profile,) = store.profiles(tiny=True)
    assert [m.status for m in profile.measurements] == ["ok"]  # what a plan reads


def test_a_failure_under_a_memory_limit_is_tried_again_without_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Only `bench --memory-limit 100MiB` had run: an uncapped sweep (a plan's) measures the config instead of
    reporting "failed before (out of memory)", and a tighter cap still reuses the failure."""
    store = Store(tmp_path / "s.sqlite")
    capped, _ = _sweep(monkeypatch, store, (0.0, 0.0, 0.0), memory_limit_bytes=100 * MiB)
    assert capped.measurements[0].extra["memory_limit_bytes"] == 100 * MiB
    tighter, script = _sweep(monkeypatch, store, (1.0, 0.01, 10.0), memory_limit_bytes=50 * MiB)
    assert script.calls == 0 and tighter.measurements[0].status == "failed"
    capfd.readouterr()
    free, script = _sweep(monkeypatch, store, (1.0, 0.01, 10.0))
    assert script.calls == 1 and free.measurements[0].status == "ok"
    assert "(1 again: failed under a tighter --memory-limit)" in capfd.readouterr().err


def test_thread_counts_past_this_machines_cores_are_not_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config_mod, "usable_cores", lambda: 2)
    res, script = _sweep(monkeypatch, None, (1.0, 0.01, 10.0), w=_workload(threads=[1, 99, None]))
    assert [m.threads for m in res.measurements] == [1, None] and script.calls == 2
    assert "threads 99 skipped: this machine has 2 cores" in res.notes
    with pytest.raises(SpecError, match=r"^threads\[0\]: 99 is more than the 2 cores this machine has; use at most 2"):
        run_sweep(_workload(threads=[99, 64]), None)
    assert fit_threads(parse_spec({"model": "simplenet"}), cores=1)[1] == []  # the default (all cores) always fits
    gpu_only = _workload(threads=[99], devices=["cuda"])
    assert fit_threads(gpu_only, cores=2) == (gpu_only, [])  # threads are a CPU setting


def test_a_config_failing_on_the_spec_stops_the_sweep_and_is_not_stored(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A user's factory fails the same way in every config's child: the first such failure ends the sweep with
    its SpecError, and nothing is stored (a fixed factory is measured without --fresh); an out-of-memory failure
    is the config's own and the sweep goes on."""
    from rightsize.measure.runner import SPEC_ERROR

    calls: list[int] = []

    def refused(cfg: BenchConfig, *_: object, **__: object) -> Measurement:
        calls.append(cfg.batch_size)
        return cfg.result("failed", reason="model: f() raised ValueError", extra={SPEC_ERROR: ["model", "f() raised"]})

    monkeypatch.setattr(sweep_mod, "run_isolated", refused)
    store = Store(tmp_path / "s.sqlite")
    with pytest.raises(SpecError, match=r"^model: f\(\) raised$"):
        run_sweep(_workload(batch_sizes=[1, 2, 4]), store)
    assert calls == [1]
    assert store.measurements() == []
    result, script = _sweep(monkeypatch, store, (0, 0, 0), w=_workload(batch_sizes=[1, 2, 4]))
    assert script.calls == 3 and [m.status for m in result.measurements] == ["failed"] * 3
