"""Harness repeatability and overhead.

    .venv/bin/python benchmarks/harness.py [SPEC]      (default examples/quick.yaml)

1. Runs the same sweep twice (fresh each time, isolated children, no store) and prints the median
   throughput per config and the run-to-run difference (issue 2 target: <= 5% on a quiet machine).
2. Measures the harness's own overhead per measured call: the adaptive timer around a no-op versus
   a bare perf_counter loop, and a child process's fixed cost (start + report) for a tiny config.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from rightsize.measure.config import BenchConfig
from rightsize.measure.runner import run_isolated
from rightsize.measure.sweep import run_sweep
from rightsize.measure.timing import TimingPolicy, cpu_timer, time_adaptive
from rightsize.spec import load_spec


def repeatability(spec: Path) -> None:
    workload = load_spec(spec)
    runs = [run_sweep(workload, None, fresh=True).measurements for _ in range(2)]
    print(f"\n## Run-to-run repeatability: {workload.model} {workload.mode} ({spec})\n")
    print("| device | precision | batch | run 1 samples/s | run 2 samples/s | difference |")
    print("|---|---|---:|---:|---:|---:|")
    diffs = []
    for a, b in zip(*runs, strict=True):
        if a.status != "ok" or b.status != "ok" or not a.throughput_per_s or not b.throughput_per_s:
            print(f"| {a.device} | {a.precision} | {a.batch_size} | {a.status} | {b.status} | - |")
            continue
        diff = abs(b.throughput_per_s - a.throughput_per_s) / a.throughput_per_s
        diffs.append(diff)
        print(
            f"| {a.device} | {a.precision} | {a.batch_size} | {a.throughput_per_s:.1f} | {b.throughput_per_s:.1f} "
            f"| {diff:.1%} |"
        )
    if diffs:
        print(f"\nmedian difference {statistics.median(diffs):.1%}, worst {max(diffs):.1%}")


def overhead() -> None:
    n = 20_000
    t0 = time.perf_counter()
    for _ in range(n):
        t1 = time.perf_counter()
        _ = time.perf_counter() - t1
    bare_us = (time.perf_counter() - t0) / n * 1e6
    policy = TimingPolicy(warmup=0, min_repeats=n, max_repeats=n, target_ci=1e-9, max_time_s=60)
    t0 = time.perf_counter()
    time_adaptive(lambda: None, policy, cpu_timer)
    harness_us = (time.perf_counter() - t0) / n * 1e6
    cfg = BenchConfig(
        "simplenet", "inference", "cpu", "fp32", 1, None, {}, "adamw", True, TimingPolicy(0, 3, 3, 1.0, 1.0)
    )
    run_isolated(cfg)  # start the forkserver (imports torch once)
    child_s = []
    for _ in range(5):
        t0 = time.perf_counter()
        run_isolated(cfg)
        child_s.append(time.perf_counter() - t0)
    print("\n## Harness overhead\n")
    print("| what | per call |")
    print("|---|---:|")
    print(f"| bare perf_counter loop | {bare_us:.2f} µs |")
    print(f"| adaptive timer around a no-op (incl. CI check) | {harness_us:.2f} µs |")
    print(f"| overhead of the adaptive timer | {harness_us - bare_us:.2f} µs |")
    print(
        f"| isolated child per config (fork, build tiny model, 3 calls, report) "
        f"| {statistics.median(child_s) * 1e3:.0f} ms |"
    )


if __name__ == "__main__":
    repeatability(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("examples/quick.yaml"))
    overhead()
