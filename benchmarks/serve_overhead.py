"""Server overhead with a trivial model: max rate and latency at a fixed offered rate.

    .venv/bin/python benchmarks/serve_overhead.py [--rate 500] [--duration 5] [--concurrency 32]

The model returns ``x[:, :1]`` (microseconds), so what is measured is HTTP + parsing + batching + the
worker hop. The server runs in a child process (``rightsize serve``), the load from rightsize.loadgen.
Goal (issue 5): >= 1,500 req/s max, p50 <= 2 ms at 500 req/s, on 2 cores. "server CPU/request" comes
from the server's own /metrics (process CPU time) and is the number to trust on a busy machine:
1000 / it is the rate one free core would sustain.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

import httpx
from torch import nn

from rightsize.loadgen import ClosedLoopConfig, OpenLoopConfig, Target, run_closed_loop, run_open_loop
from rightsize.serve import ServerConfig
from rightsize.serve.process import running_server_process

BODY = b'{"inputs": [[1.0, 2.0, 3.0, 4.0]]}'


class Trivial(nn.Module):
    def forward(self, x):  # type: ignore[no-untyped-def]
        return x[:, :1]


def trivial() -> nn.Module:
    """Factory for ``serve_overhead:trivial`` (benchmarks/ on PYTHONPATH)."""
    return Trivial()


def cpu_utilization(url: str) -> float:
    """The server's CPU time / (wall × cores) since its previous /metrics scrape (each scrape starts a window)."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    found = re.search(r"^rightsize_cpu_utilization (\S+)$", text, re.M)
    return float(found.group(1)) if found else float("nan")


class CpuMeter:
    """CPU seconds the server spends between start() and stop(): utilisation × wall × cores."""

    def __init__(self, url: str, cores: int) -> None:
        self.url, self.cores = url, cores

    def start(self) -> None:
        cpu_utilization(self.url)  # opens a fresh utilisation window
        self.t0 = time.perf_counter()

    def stop(self) -> float:
        wall = time.perf_counter() - self.t0
        return cpu_utilization(self.url) * wall * self.cores


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=500.0, help="offered rate of the latency run, req/s")
    ap.add_argument("--duration", type=float, default=5.0, help="seconds per run")
    ap.add_argument("--concurrency", type=int, default=32, help="closed-loop users of the max-rate run")
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args()

    here = str(Path(__file__).resolve().parent)
    env = {"PYTHONPATH": os.pathsep.join([here, os.environ.get("PYTHONPATH", "")])}
    config = ServerConfig(model="serve_overhead:trivial", sample_shape=(4,), port=0, max_batch=8, max_wait_ms=0.0,
                          workers=args.workers, threads=1, queue_size=4096)  # fmt: skip
    with running_server_process(config, env=env) as url:
        info = httpx.get(f"{url}/v1/info").json()
        target = Target.from_url(f"{url}/v1/predict", body=BODY)
        meter = CpuMeter(url, int(info["cores"]))
        run_open_loop(target, OpenLoopConfig(rate_per_s=200, duration_s=1.0))  # warm the path
        meter.start()
        closed = run_closed_loop(target, ClosedLoopConfig(concurrency=args.concurrency, duration_s=args.duration))
        cpu_ms = meter.stop() / max(1, closed.requests_sent) * 1000
        time.sleep(0.5)
        opened = run_open_loop(target, OpenLoopConfig(rate_per_s=args.rate, duration_s=args.duration))
    lat = opened.latency_ms
    rows = [
        (f"max rate, closed loop x{args.concurrency} (req/s)", f"{closed.throughput_per_s:,.0f}", ">= 1,500"),
        ("server CPU per request (ms)", f"{cpu_ms:.3f}", ""),
        ("one free core would sustain (req/s)", f"{1000 / cpu_ms:,.0f}" if cpu_ms > 0 else "-", ""),
        (f"open loop {args.rate:g} req/s: achieved", f"{opened.achieved_rate_per_s:,.0f}", ""),
        ("  p50 (ms)", f"{lat.p50:.2f}" if lat else "-", "<= 2"),
        ("  p95 / p99 (ms)", f"{lat.p95:.2f} / {lat.p99:.2f}" if lat else "-", ""),
        ("  errors", str(opened.errors or 0), ""),
        ("  run valid (generator kept up)", str(opened.valid) + ("" if opened.valid else f" {opened.problems}"), ""),
    ]
    print(
        f"\nserve overhead — trivial model, {info['cores']} cores, workers={args.workers}, max_batch=8, max_wait=0 ms"
    )
    print(f"{'metric':<40} {'measured':>18}  goal")
    for name, value, goal in rows:
        print(f"{name:<40} {value:>18}  {goal}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
