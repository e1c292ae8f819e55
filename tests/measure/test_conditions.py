"""Measurements that know when they were disturbed: a CPU hog beside the sweep is detected, every time."""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from rightsize.measure.conditions import CONTENTION_THRESHOLD, RunConditions, run_wait_s
from rightsize.measure.sweep import run_sweep
from rightsize.profile import Measurement
from rightsize.quality import measurement_quality
from rightsize.spec import parse_spec

FAST = {"warmup": 2, "min_repeats": 30, "max_repeats": 200, "target_ci": 0.001, "max_time_s": 1.5}
HOG_SECONDS = 60.0  # upper bound; the hog is killed as soon as the measurement ends


def _spin(deadline: float) -> None:
    x = 0
    while time.time() < deadline:
        x += 1


@contextmanager
def cpu_hogs() -> Iterator[None]:
    """One spinning process per core this test may use: any measurement must share a core with one."""
    cores = sorted(os.sched_getaffinity(0))
    ctx = mp.get_context("fork")
    procs = []
    for c in cores:
        p = ctx.Process(target=_spin, args=(time.time() + HOG_SECONDS,), daemon=True)
        p.start()
        os.sched_setaffinity(p.pid, {c})
        procs.append(p)
    try:
        time.sleep(0.2)
        yield
    finally:
        for p in procs:
            p.kill()
            p.join(timeout=5)


def _one_config_sweep() -> Measurement:
    w = parse_spec({"model": "simplenet", "tiny": True, "batch_sizes": [1], "threads": [1], "timing": FAST})
    result = run_sweep(w, None)
    (m,) = result.measurements
    assert m.status == "ok", m.reason
    return m


def test_contention_share_from_counters() -> None:
    c = RunConditions(wall_s=1.0, cpu_s=0.5, wait_s=0.5)
    assert c.contention(1) == (0.5, "schedstat run-queue wait")
    assert c.to_extra(1, 2e9, 100.0)["achieved_gflops"] == pytest.approx(20.0)
    assert RunConditions(wall_s=1.0, cpu_s=0.25, wait_s=None).contention(2)[0] == pytest.approx(0.875)


@pytest.mark.skipif(run_wait_s() is None, reason="needs Linux schedstat")
def test_a_cpu_hog_beside_the_sweep_is_detected_and_remeasured() -> None:
    with cpu_hogs():
        m = _one_config_sweep()
    assert m.extra["contended"] is True and m.extra["contention"] > CONTENTION_THRESHOLD
    assert m.extra["attempts"] == 3  # measured again twice; it stayed contended
    q = measurement_quality([m])
    assert q.contended == 1 and q.problems and "busy" in q.summary and "slower" in q.likely_effect
    quiet = _one_config_sweep()
    assert quiet.extra["contention"] < m.extra["contention"]  # the same config without the hogs waits less


def test_bench_shows_the_contention(tmp_path: Path) -> None:
    import subprocess
    import sys

    spec = tmp_path / "s.yaml"
    spec.write_text(
        "model: simplenet\ntiny: true\nbatch_sizes: [1]\nthreads: [1]\n"
        "timing: {warmup: 2, min_repeats: 30, max_repeats: 200, target_ci: 0.001, max_time_s: 1.5}\n"
    )
    cmd = [sys.executable, "-m", "rightsize", "bench", str(spec), "--store", str(tmp_path / "db.sqlite")]
    with cpu_hogs():
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "200"})
    assert res.returncode == 0, res.stderr
    assert "contended" in res.stdout and "measurement quality" in res.stderr
