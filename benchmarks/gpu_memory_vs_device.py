"""The memory estimator against real CUDA runs (benchmarks/gpu/results/*/measurements.json).

    .venv/bin/python benchmarks/gpu_memory_vs_device.py          # every distinct config of every run (~30 s)

``rightsize bench`` on a GPU records, per config, PyTorch's peak allocated bytes
(``torch.cuda.max_memory_allocated``: every tensor the run held at once), the caching allocator's peak
reserved bytes and the CUDA context. ``rightsize memory`` (``estimate_memory``, a FakeTensor trace; it never
sees the run) predicts both:

- tensors: the estimate's weights, gradients, optimizer states, activations, transients and the cuBLAS
  workspace (PyTorch allocates it through its caching allocator) — its total without the CUDA context and the
  fragmentation margin — vs peak allocated;
- total: the estimate's total vs peak reserved + the context (what ``nvidia-smi`` would show).

One caveat is printed with the rows it concerns: ``rightsize bench`` runs fp16/bf16 *inference* as autocast
over fp32 weights (``measure/precision.py``), while the estimator prices a model cast to half (what
deployments do, and what its LLM figures need). Those rows measure a different deployment and are
reported apart, not in the summary.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_vs_device import parse_runs  # a sibling script: one command line for the GPU benchmarks

MIB = 2**20
OVERHEADS = ("cuda_context", "fragmentation")


def rows_of(runs: list[Path]) -> list[dict[str, Any]]:
    """One row per distinct (model, mode, precision, batch, input) across the runs, with the first run's
    measurement (the allocator's peaks do not depend on the GPU)."""
    from rightsize.estimate.memory_estimate import estimate_memory

    seen: set[tuple[Any, ...]] = set()
    out = []
    for run in runs:
        data = json.loads((run / "measurements.json").read_text(encoding="utf-8"))
        for m in data["measurements"]:
            inp = m["input"]
            key = (m["model"], m["mode"], m["precision"], m["batch_size"], tuple(sorted(inp.items())))
            if key in seen or not m.get("peak_memory_bytes") or m["precision"] == "int8":
                continue
            seen.add(key)
            est = estimate_memory(
                m["model"], mode="train" if m["mode"] == "training" else "infer", precision=m["precision"],
                batch_size=m["batch_size"], seq_len=inp.get("seq_len"), image_size=inp.get("image_size"),
                device="cuda", advise=False,
            )  # fmt: skip
            tensors = est.total_bytes - sum(est.breakdown.get(k, 0) for k in OVERHEADS)
            reserved = (m.get("reserved_memory_bytes") or 0) + (m.get("context_memory_bytes") or 0)
            out.append({
                "run": run.name, "model": m["model"], "mode": m["mode"], "precision": m["precision"],
                "batch": m["batch_size"], "tensors_est": tensors, "allocated": m["peak_memory_bytes"],
                "total_est": est.total_bytes, "reserved_plus_context": reserved or None,
                "autocast_inference": m["mode"] == "inference" and m["precision"] in ("fp16", "bf16"),
            })  # fmt: skip
    return out


def _errors(rows: list[dict[str, Any]], est: str, truth: str) -> list[float]:
    return [r[est] / r[truth] - 1.0 for r in rows if r.get(truth)]


def summary(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    out = {}
    for name, est, truth in (("tensors vs peak allocated", "tensors_est", "allocated"),
                             ("total vs reserved + context", "total_est", "reserved_plus_context")):  # fmt: skip
        errs = _errors(rows, est, truth)
        if errs:
            out[name] = {"n": len(errs), "median_abs_error": statistics.median(abs(e) for e in errs),
                         "worst": max(errs, key=abs), "within_10pct": sum(abs(e) <= 0.10 for e in errs)}  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    args, runs = parse_runs(argv, __doc__)
    rows = rows_of(runs)
    same = [r for r in rows if not r["autocast_inference"]]
    groups = {
        "training (fp32, AMP)": [r for r in same if r["mode"] == "training"],
        "inference fp32": [r for r in same if r["mode"] == "inference"],
        "all priced alike": same,
        "fp16/bf16 inference (bench: autocast over fp32 weights; not priced alike)": [
            r for r in rows if r["autocast_inference"]
        ],
    }
    report = {"rows": rows, "summary": {k: summary(v) for k, v in groups.items()}}
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    print(f"{'model':<13}{'mode':<10}{'prec':<6}{'batch':>6}{'tensors est':>13}{'allocated':>11}{'err':>6}"
          f"{'total est':>11}{'reserved+ctx':>14}{'err':>6}  (MiB)")  # fmt: skip
    for r in rows:
        res = r["reserved_plus_context"]
        tail = f"{res / MIB:>14.0f}{r['total_est'] / res - 1:>+6.0%}" if res else f"{'-':>14}{'':>6}"
        flag = "  autocast over fp32 weights" if r["autocast_inference"] else ""
        print(f"{r['model']:<13}{r['mode']:<10}{r['precision']:<6}{r['batch']:>6}{r['tensors_est'] / MIB:>13.0f}"
              f"{r['allocated'] / MIB:>11.0f}{r['tensors_est'] / r['allocated'] - 1:>+6.0%}"
              f"{r['total_est'] / MIB:>11.0f}{tail}{flag}")  # fmt: skip
    print()
    for g, s in report["summary"].items():
        for name, v in s.items():
            print(f"{g:<40} {name:<28} n={v['n']:<3} median |err| {v['median_abs_error']:>5.1%}  "
                  f"worst {v['worst']:+.0%}  within 10%: {v['within_10pct']}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
