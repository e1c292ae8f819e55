"""Batching on vs off for a small model on this CPU: the highest rate that meets a p95 SLO.

    .venv/bin/python benchmarks/batching_on_off.py [--model distilbert] [--full] [--slo-ms 50] [--duration 3]

Each configuration runs in its own ``rightsize serve`` child process; rightsize.loadgen searches the
knee open-loop (Poisson arrivals, latency from the intended send time; widen, then bisect). Batching
off is max_batch=1; on is max_batch=8 with a 2 ms window. Same workers and threads for both.
The generator runs on the first core and the server on the others (``rightsize.cpus``; ``--no-split``
to share them): on 2 cores a shared run measured the generator's starvation, not batching.
"""

from __future__ import annotations

import argparse
import re

import httpx

from rightsize.cpus import CpuSplit, pinned, split_cpus
from rightsize.loadgen import KneeStep, OpenLoopConfig, Target, body_for_server, find_knee_open_loop
from rightsize.serve import ServerConfig
from rightsize.serve.process import running_server_process


def mean_batch(url: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    total = sum(float(v) for v in re.findall(r"^rightsize_batch_size_sum\{[^}]*\} (\S+)$", text, re.M))
    count = sum(float(v) for v in re.findall(r"^rightsize_batch_size_count\{[^}]*\} (\S+)$", text, re.M))
    return total / count if count else 0.0


def print_step(step: KneeStep) -> None:
    p95 = step.result.latency_ms.p95 if step.result.latency_ms else float("nan")
    print(f"    {step.rate_per_s:8.0f}/s  p95 {p95:8.1f} ms  {'ok' if step.meets_slo else step.reason}")


def knee(config: ServerConfig, slo_ms: float, args: argparse.Namespace, split: CpuSplit | None) -> dict[str, object]:
    duration_s, start_rate, steps = args.duration, args.start_rate, args.steps
    server_cpus, generator_cpus = (None, None) if split is None else (split.server, split.generator)
    with running_server_process(config, cpus=server_cpus) as url, pinned(generator_cpus):
        info = httpx.get(f"{url}/v1/info", timeout=10).json()
        target = Target.from_url(f"{url}/v1/predict", body=body_for_server(info))
        load = OpenLoopConfig(rate_per_s=start_rate, duration_s=duration_s, slo_ms=slo_ms, warmup_s=0.5,
                              max_lag_ms=args.max_lag_ms)  # fmt: skip
        result = find_knee_open_loop(target, load, slo_ms, start_rate_per_s=start_rate, max_steps=steps,
                                     tolerance=0.1, pause_s=0.3, confirm_failures=args.confirm,
                                     on_step=print_step)  # fmt: skip
        best = [s for s in result.steps if s.meets_slo and s.rate_per_s == result.rate_per_s]
        p95 = best[-1].result.latency_ms.p95 if best and best[-1].result.latency_ms else float("nan")
        return {"knee": result.rate_per_s or 0.0, "p95": p95, "batch": mean_batch(url),
                "limited": result.generator_limited, "upper": result.upper_per_s}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="distilbert")
    ap.add_argument("--full", action="store_true", help="full-size model (default: tiny)")
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--slo-ms", type=float, default=50.0)
    ap.add_argument("--duration", type=float, default=3.0, help="seconds per knee step")
    ap.add_argument("--start-rate", type=float, default=50.0)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--max-batch", type=int, default=8)
    ap.add_argument("--max-wait-ms", type=float, default=2.0)
    ap.add_argument("--confirm", type=int, default=1, help="re-runs of a failing rate (noise only adds latency)")
    ap.add_argument(
        "--max-lag-ms",
        type=float,
        default=10.0,
        help="a step is invalid when the generator's p99 send lag exceeds this (raise on a busy machine)",
    )
    ap.add_argument("--no-split", action="store_true", help="let the generator and the server share every core")
    args = ap.parse_args()
    split = None if args.no_split else split_cpus()
    if split is not None:
        print(f"  cores: server {sorted(split.server)}, load generator {sorted(split.generator)}")

    base = ServerConfig(model=args.model, tiny=not args.full, seq_len=args.seq, port=0, queue_size=512)
    configs = {
        "off (max_batch 1)": ServerConfig(**{**base.__dict__, "max_batch": 1, "max_wait_ms": 0.0}),
        f"on (max_batch {args.max_batch}, {args.max_wait_ms:g} ms)": ServerConfig(
            **{**base.__dict__, "max_batch": args.max_batch, "max_wait_ms": args.max_wait_ms}
        ),
    }
    rows = {}
    for name, config in configs.items():
        print(f"  batching {name}:")
        rows[name] = knee(config, args.slo_ms, args, split)
    off = next(iter(rows.values()))["knee"]
    model = f"{args.model}{'' if args.full else ' (tiny)'}, seq {args.seq}"
    print(f"\nbatching on vs off — {model}, SLO p95 <= {args.slo_ms:g} ms, open loop, {args.duration:g} s per step")
    print(f"{'batching':<28} {'max rate (req/s)':>17} {'p95 there (ms)':>15} {'mean batch':>11} {'vs off':>8}")
    for name, r in rows.items():
        ratio = f"{r['knee'] / off:.2f}x" if off else "-"  # type: ignore[operator]
        flag = "  (generator-limited)" if r["limited"] else ""
        print(f"{name:<28} {r['knee']:>17.0f} {r['p95']:>15.1f} {r['batch']:>11.2f} {ratio:>8}{flag}")


if __name__ == "__main__":
    main()
