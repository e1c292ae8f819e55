"""The host's speed at one moment: microseconds to dispatch one small eager op, on the GPU and on the CPU.

Run between the steps of ``run_on_device.sh`` (never beside one: it would share the GPU), it appends one JSON
line per call, so each step's host-bound timings can be read against the host speed measured just before it.
On the 2026-11-26 runs the same ResNet-50 batch-1 step took 4.5 ms on one host and 10.3 ms on another:
a host-bound batch's time is the host's, and this records how fast the host was.
"""

from __future__ import annotations

import argparse
import json
import time

import torch


def us_per_op(device: str, n: int = 5000, repeats: int = 3) -> float:
    """Median over ``repeats`` of the time per in-place add on a 16-element tensor, microseconds."""
    x = torch.zeros(16, device=device)
    for _ in range(500):
        x.add_(1.0)
    if device == "cuda":
        torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            x.add_(1.0)
        times.append((time.perf_counter() - t0) / n * 1e6)
        if device == "cuda":
            torch.cuda.synchronize()
    return round(sorted(times)[len(times) // 2], 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--label", required=True, help="the step this reading precedes")
    ap.add_argument("--out", required=True, help="JSON-lines file to append to")
    a = ap.parse_args()
    row = {"label": a.label, "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "cpu_us_per_op": us_per_op("cpu")}
    if torch.cuda.is_available():
        row["cuda_us_per_op"] = us_per_op("cuda")
    with open(a.out, "a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")
    print("host probe", row, flush=True)


if __name__ == "__main__":
    main()
