"""A request-size split on a real server: two CPU lanes behind the size router, against the fleet simulator.

    .venv/bin/python benchmarks/fleet_vs_server.py                  # mobilenet_v2, 95% x 1 image / 5% x 16
    .venv/bin/python benchmarks/fleet_vs_server.py --rate 30 --duration 40 --repeat 2

``rightsize serve MODEL --lane small=1x1 --lane large=1x1 --router size --crossover L`` runs in a child
process: requests of fewer than L samples go to the small lane, the rest to the large lane, one worker of
one thread each (the 2-core dev VM's two cores). Two open-loop generators send the two classes at once
(Poisson each, so their sum is Poisson), each counting its own latencies from the intended send time.

The prediction is ``rightsize.plan.fleet.run_sized``, the simulator `rightsize plan` sizes a split fleet
with: per lane, the class's arrivals, one replica, the lane's batcher (max batch, no wait), and the batch
times the server itself measured in this run (``GET /v1/batches``: worker-busy time per batch, by lane
and samples, read as ``rightsize validate`` reads them for a request mix: ``mix_replay.served_table``),
plus the per-request serving overhead from a light-load probe before the run (HTTP, parsing: what the
worker-busy time leaves out). So this checks the simulator and the size split, not the projection of the
curve (that is ``validate_accuracy.py``).
Goal: each class's p50 and p95 within ±20% of the measured one.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from typing import Any

import httpx
import numpy as np

from rightsize.loadgen import OpenLoopConfig, Target, run_open_loop
from rightsize.loadgen.result import LoadResult
from rightsize.loadgen.target import payload_for_server, server_info
from rightsize.plan.fleet import run_sized
from rightsize.profile import ServiceCurve
from rightsize.serve import ServerConfig
from rightsize.serve.config import PoolConfig
from rightsize.serve.process import running_server_process
from rightsize.workflows.mix_replay import served_table


def probe_overhead_ms(url: str, body: bytes, content_type: str, n: int = 30) -> float:
    """Median of (request latency - its batch's worker-busy time) over ``n`` sequential single requests."""
    first = httpx.get(f"{url}/v1/batches").json()["next"]
    lat = []
    with httpx.Client(timeout=30) as client:
        for _ in range(n):
            t0 = time.perf_counter()
            client.post(f"{url}/v1/predict", content=body, headers={"content-type": content_type}).raise_for_status()
            lat.append((time.perf_counter() - t0) * 1e3)
            time.sleep(0.02)
    rows = httpx.get(f"{url}/v1/batches", params={"since": first}).json()["batches"]
    model = [r[3] for r in rows]  # worker-busy ms: the model call and the hops around it
    return max(0.0, statistics.median(lat) - statistics.median(model))


def lane_table(rows: list[list[Any]], max_batch: int) -> tuple[np.ndarray, np.ndarray]:
    """The product's served-time table (``mix_replay.served_table``) for one lane's logged batches, with a
    curve through the lane's own per-size means standing in for the profile where a size was not run."""
    by_n: dict[int, list[float]] = {}
    for _, n, _, busy, *_ in rows:
        by_n.setdefault(int(n), []).append(float(busy))
    ns = sorted(by_n)
    curve = ServiceCurve("cpu:served", "fp32", tuple(ns), tuple(statistics.mean(by_n[n]) for n in ns),
                         (0.0,) * len(ns), "measured")  # fmt: skip
    return served_table([(n, ms) for n, v in by_n.items() for ms in v], curve, max_batch)


def drive(url: str, samples: int, rate: float, duration: float, warmup: float, seed: int,
          out: dict[str, LoadResult], key: str) -> None:  # fmt: skip
    target = Target.from_url(f"{url}/v1/predict", samples=samples)  # the server's own binary tensor body
    config = OpenLoopConfig(rate_per_s=rate, duration_s=duration, warmup_s=warmup, seed=seed, connections=64)
    out[key] = run_open_loop(target, config)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="mobilenet_v2")
    ap.add_argument("--rate", type=float, default=30.0, help="requests per second, both classes")
    ap.add_argument("--large", type=int, default=16, help="samples of a large request (the crossover)")
    ap.add_argument("--large-share", type=float, default=0.05)
    ap.add_argument("--duration", type=float, default=40.0)
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--seq", type=int, default=None, help="sequence length of a token model")
    ap.add_argument("--large-precision", default=None, help="the large lane's precision (fp32, bf16, int8)")
    args = ap.parse_args()

    lanes = (PoolConfig("small", "cpu", 1, 1), PoolConfig("large", "cpu", 1, 1, precision=args.large_precision))
    config = ServerConfig(model=args.model, seq_len=args.seq, port=0, max_batch=args.large, max_wait_ms=0.0,
                          router="size", crossover_batch=args.large, pools=lanes, queue_size=4096,
                          max_queue_batches=0.0)  # fmt: skip
    rates = {"small": args.rate * (1 - args.large_share), "large": args.rate * args.large_share}
    sizes = {"small": 1, "large": args.large}
    large_lane = "1x1" + (f":{args.large_precision}" if args.large_precision else "")
    print(f"{args.model}: {1 - args.large_share:.0%} x 1 sample + {args.large_share:.0%} x {args.large} samples at "
          f"{args.rate:g} req/s; lanes small=1x1, large={large_lane}, router size, crossover {args.large}; "
          f"{args.duration:g} s runs")  # fmt: skip
    errors: list[float] = []
    header = (f"{'run':>3} {'class':<6} {'rate/s':>7} {'sent':>6} {'meas p50':>9} {'pred p50':>9} {'err':>6} "
              f"{'meas p95':>9} {'pred p95':>9} {'err':>6}  lane: batches, mean samples, model ms")  # fmt: skip
    with running_server_process(config) as url:
        probe_body, probe_type = payload_for_server(server_info(url), 1)
        print(header)
        for run in range(1, args.repeat + 1):
            overhead = probe_overhead_ms(url, probe_body, probe_type)
            first = httpx.get(f"{url}/v1/batches").json()["next"]
            out: dict[str, LoadResult] = {}
            threads = [threading.Thread(target=drive, args=(url, sizes[k], rates[k], args.duration, args.warmup,
                                                            run * 10 + i, out, k))
                       for i, k in enumerate(("small", "large"))]  # fmt: skip
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            rows = httpx.get(f"{url}/v1/batches", params={"since": first}).json()["batches"]
            for i, k in enumerate(("small", "large")):
                lane_rows = [r for r in rows if r[0] == k]
                res = out[k]
                if not lane_rows or res.latency_ms is None:
                    print(f"{run:>3} {k:<6} no batches or no answers: {res.problems}")
                    continue
                t_tab, sig = lane_table(lane_rows, args.large)
                rng = np.random.default_rng(run * 100 + i)
                n = 40_000
                arrivals = np.cumsum(rng.exponential(1000.0 / rates[k], n))
                lat, _, _ = run_sized(arrivals, np.full(n, sizes[k]), 1, args.large, 0.0, t_tab, sig, rng)
                lat = lat[n // 10 :] + overhead
                p50, p95 = np.percentile(lat, [50, 95])
                m = res.latency_ms
                e50, e95 = 100 * (p50 - m.p50) / m.p50, 100 * (p95 - m.p95) / m.p95
                errors += [abs(e50), abs(e95)]
                mean_n = statistics.mean(int(r[1]) for r in lane_rows)
                model_ms = statistics.mean(float(r[2]) for r in lane_rows)
                print(f"{run:>3} {k:<6} {rates[k]:>7.1f} {res.requests_sent:>6} {m.p50:>9.1f} {p50:>9.1f} "
                      f"{e50:>+5.0f}% {m.p95:>9.1f} {p95:>9.1f} {e95:>+5.0f}%  {len(lane_rows)}, {mean_n:.1f}, "
                      f"{model_ms:.1f}"
                      f"{'' if res.valid else '  INVALID: ' + '; '.join(res.problems)}")  # fmt: skip
            print(f"    serving overhead per request (light-load probe): {overhead:.2f} ms")
    if errors:
        ok = max(errors) <= 20.0
        print(f"\n|error| over {len(errors)} class percentiles: median {statistics.median(errors):.0f}%, worst "
              f"{max(errors):.0f}% (goal: every one within 20%: {'PASS' if ok else 'FAIL'})")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
