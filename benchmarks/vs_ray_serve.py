"""rightsize serve vs Ray Serve ``@serve.batch``: same model, batch settings and SLO, alternated runs, this machine.

    .venv/bin/python benchmarks/vs_ray_serve.py [--model distilbert] [--slo-ms 50] [--duration 3] [--rounds 3]

Both servers listen on 127.0.0.1 and get the same open-loop load from rightsize.loadgen (Poisson
arrivals, latency from the intended send time); the knee is the highest rate whose p95 meets the SLO.
Ray: one replica whose ``@serve.batch(max_batch_size, batch_wait_timeout_s)`` method runs the model
with all cores' intra-op threads, behind Ray's HTTP proxy. rightsize: its defaults for these cores
(workers x threads = cores). The load generator runs on the first core and both servers (Ray's
daemons, proxy and replica included) on the others; ``--no-split`` shares every core.
The two servers run alternated, ``--rounds`` times each (A B, B A, A B, ...: neither always goes first
on a machine whose load drifts), and the table prints each server's median knee with its min-max, and
the ratio of the medians. Goal: rightsize >= 1.5x Ray Serve's max rate at the same p95 SLO.
Needs ``pip install "ray[serve]"``.
"""

from __future__ import annotations

import argparse
import itertools
import socket
import statistics
import time
from typing import Any

import httpx

from rightsize.cpus import CpuSplit, pinned, split_cpus
from rightsize.loadgen import OpenLoopConfig, Target, body_for_server, find_knee_open_loop
from rightsize.loadgen.knee import KneeResult, KneeStep
from rightsize.serve import ServerConfig
from rightsize.serve.config import cpu_cores
from rightsize.serve.process import running_server_process


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def print_step(step: KneeStep) -> None:
    p95 = step.result.latency_ms.p95 if step.result.latency_ms else float("nan")
    print(f"    {step.rate_per_s:8.0f}/s  p95 {p95:8.1f} ms  {'ok' if step.meets_slo else step.reason}")


def knee(url: str, body: bytes, args: argparse.Namespace) -> KneeResult:
    target = Target.from_url(url, body=body)
    load = OpenLoopConfig(rate_per_s=args.start_rate, duration_s=args.duration, slo_ms=args.slo_ms, warmup_s=0.5,
                          max_lag_ms=args.max_lag_ms)  # fmt: skip
    return find_knee_open_loop(
        target, load, args.slo_ms, start_rate_per_s=args.start_rate, max_steps=args.steps, tolerance=0.1,
        pause_s=0.3, confirm_failures=args.confirm,
        on_step=print_step,
    )  # fmt: skip


def ray_app(model: str, tiny: bool, seq: int, max_batch: int, wait_s: float, threads: int) -> Any:
    """A Ray Serve application serving the zoo model with ``@serve.batch``."""
    import numpy as np
    from ray import serve
    from starlette.requests import Request

    @serve.deployment(max_ongoing_requests=1024, ray_actor_options={"num_cpus": 0})
    class RayModel:
        def __init__(self) -> None:
            import torch

            from rightsize.models import resolve_model

            torch.set_num_threads(threads)
            self.torch = torch
            self.entry = resolve_model(model)
            self.model = self.entry.build(tiny)
            self.dtype = np.int64 if self.entry.kind == "tokens" else np.float32

        @serve.batch(max_batch_size=max_batch, batch_wait_timeout_s=wait_s)
        async def predict(self, inputs: list[np.ndarray]) -> list[list[list[float]]]:
            x = self.torch.from_numpy(np.concatenate(inputs))
            with self.torch.inference_mode():
                out = self.model(x).float().numpy()
            sizes = [len(i) for i in inputs]
            starts = np.cumsum([0, *sizes])
            return [out[a:b].tolist() for a, b in itertools.pairwise(starts)]

        async def __call__(self, request: Request) -> dict[str, Any]:
            body = await request.json()
            x = np.asarray(body["inputs"], dtype=self.dtype)
            return {"outputs": await self.predict(x)}

    return RayModel.bind()


def run_ray(args: argparse.Namespace, body: bytes, cores: int, split: CpuSplit | None) -> KneeResult:
    import ray
    from ray import serve

    port = free_port()
    with pinned(None if split is None else split.server):  # Ray's daemons and replicas inherit the server cores
        ray.init(_node_ip_address="127.0.0.1", include_dashboard=False, num_cpus=cores, log_to_driver=False)
    try:
        with pinned(None if split is None else split.server):
            serve.start(http_options={"host": "127.0.0.1", "port": port})
            app = ray_app(args.model, not args.full, args.seq, args.max_batch, args.max_wait_ms / 1000, cores)
            serve.run(app, route_prefix="/predict")
        url = f"http://127.0.0.1:{port}/predict"
        for _ in range(200):  # the proxy may answer 503/404 until the route is live
            if (
                httpx.post(url, content=body, headers={"content-type": "application/json"}, timeout=30).status_code
                == 200
            ):
                break
            time.sleep(0.2)
        with pinned(None if split is None else split.generator):
            return knee(url, body, args)
    finally:
        serve.shutdown()
        ray.shutdown()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="distilbert")
    ap.add_argument("--full", action="store_true", help="full-size model (default: tiny)")
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--slo-ms", type=float, default=50.0)
    ap.add_argument("--max-batch", type=int, default=8)
    ap.add_argument("--max-wait-ms", type=float, default=2.0)
    ap.add_argument("--duration", type=float, default=3.0, help="seconds per knee step")
    ap.add_argument("--start-rate", type=float, default=100.0)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--confirm", type=int, default=1, help="re-runs of a failing rate (noise only adds latency)")
    ap.add_argument("--max-lag-ms", type=float, default=10.0, help="generator p99 send lag that invalidates a step")
    ap.add_argument("--no-split", action="store_true", help="let the generator and the servers share every core")
    ap.add_argument("--rounds", type=int, default=3, help="alternated runs of each server (>= 3 for a median)")
    args = ap.parse_args()
    split = None if args.no_split else split_cpus()
    cores = cpu_cores() if split is None else len(split.server)
    if split is not None:
        print(f"  cores: servers {sorted(split.server)}, load generator {sorted(split.generator)}")

    config = ServerConfig(model=args.model, tiny=not args.full, seq_len=args.seq, port=0, max_batch=args.max_batch,
                          max_wait_ms=args.max_wait_ms, queue_size=1024)  # fmt: skip
    with running_server_process(config, cpus=None if split is None else split.server) as url:
        info = httpx.get(f"{url}/v1/info", timeout=10).json()
    body = body_for_server(info)

    def ours_once() -> KneeResult:
        server = running_server_process(config, cpus=None if split is None else split.server)
        with server as url, pinned(None if split is None else split.generator):
            return knee(f"{url}/v1/predict", body, args)

    runs: dict[str, list[KneeResult]] = {"rightsize": [], "ray": []}
    for r in range(args.rounds):
        order = ("rightsize", "ray") if r % 2 == 0 else ("ray", "rightsize")
        for name in order:
            what = "rightsize serve" if name == "rightsize" else "Ray Serve @serve.batch"
            print(f"  round {r + 1}/{args.rounds}: {what}")
            runs[name].append(ours_once() if name == "rightsize" else run_ray(args, body, cores, split))

    print(f"\nrightsize vs Ray Serve — {args.model}{'' if args.full else ' (tiny)'} seq {args.seq}, max batch "
          f"{args.max_batch}, wait {args.max_wait_ms:g} ms, SLO p95 <= {args.slo_ms:g} ms, {cores} server core(s), "
          f"{args.rounds} alternated rounds")  # fmt: skip
    print(f"{'server':<40} {'median max rate':>16} {'min-max':>15} {'runs (req/s)':>24}")
    pools = ", ".join(f"{p['workers']} workers x {p['threads']} threads" for p in info["pools"])
    labels = {"rightsize": f"rightsize ({pools})", "ray": f"Ray Serve (1 replica x {cores} threads)"}
    medians: dict[str, float] = {}
    for name, ks in runs.items():
        rates = [k.rate_per_s or 0.0 for k in ks]
        medians[name] = statistics.median(rates)
        flag = "  (generator-limited)" if any(k.generator_limited for k in ks) else ""
        each = ", ".join(f"{x:.0f}" for x in rates)
        print(f"{labels[name]:<40} {medians[name]:>16.0f} {min(rates):>7.0f}-{max(rates):<7.0f} {each:>24}{flag}")
    if medians["ray"]:
        ratio = medians["rightsize"] / medians["ray"]
        verdict = "PASS" if ratio >= 1.5 else "FAIL"
        print(f"ratio of medians rightsize / Ray Serve: {ratio:.2f}x  (goal >= 1.5x: {verdict})")


if __name__ == "__main__":
    main()
