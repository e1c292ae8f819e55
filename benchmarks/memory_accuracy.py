"""Accuracy of the memory estimator on this machine's CPU: estimated vs measured, error %.

    .venv/bin/python benchmarks/memory_accuracy.py            # full table (~2-5 min on 2 cores)
    .venv/bin/python benchmarks/memory_accuracy.py --quick    # batch 8 only
    .venv/bin/python benchmarks/memory_accuracy.py --json

Rows:
- train activations: the FakeTensor trace's saved-for-backward bytes vs SavedTensorTracker on a real
  forward (fp32, and bf16 autocast) for resnet50 and distilbert at batch 8 and 32. Target: ±10%.
- train fwd+bwd peak (tensors): the trace's peak of live non-parameter tensor bytes over forward +
  backward vs LiveTensorTracker on the real run (same counting rule, real CPU tensors).
- infer peak (tensors): the same for a no_grad forward.
- infer peak (RSS): the estimated peak above the weights vs the RSS peak above baseline of a real
  no_grad forward (after a warm-up). RSS also counts allocator caches and oneDNN scratch memory,
  so this row is indicative, not a target.

Acceptance: ``rightsize memory llama-7b --mode infer --precision fp16 --batch 1 --seq 2048 --json`` and
the llama-1b fp16 check run as subprocesses: wall time, the child's max RSS, total and tier.

``memory_rows()`` is imported by ``benchmarks/estimate_accuracy.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import time
from typing import Any

MIB = 2**20
MODELS = ("resnet50", "distilbert")


def train_activation_row(model: str, precision: str, batch: int) -> dict[str, Any]:
    """Estimated vs measured saved-for-backward bytes for one training configuration."""
    import torch

    from rightsize.estimate.memory_estimate import estimate_memory
    from rightsize.measure.memory import SavedTensorTracker
    from rightsize.models.zoo import get_entry

    t0 = time.perf_counter()
    est = estimate_memory(model, mode="train", precision=precision, batch_size=batch, device="cpu", advise=False)
    estimate_s = time.perf_counter() - t0
    entry = get_entry(model)
    torch.manual_seed(0)
    net = entry.build().train()
    x = entry.example_input(batch)
    y = entry.example_labels(x)
    amp = torch.autocast("cpu", dtype=torch.bfloat16) if precision == "bf16" else contextlib.nullcontext()
    with SavedTensorTracker(net) as saved, amp:
        loss = net.loss(x, y)
    del loss
    return _row(model, "train activations", precision, batch, est.components["activations_saved"],
                saved.saved_bytes, estimate_s)  # fmt: skip


def tensor_peak_row(model: str, mode: str, precision: str, batch: int) -> dict[str, Any]:
    """Traced (fake) vs real peak of live non-parameter tensor bytes, both counted by LiveTensorTracker."""
    import torch

    from rightsize.estimate.memory_trace import trace_memory
    from rightsize.measure.memory import LiveTensorTracker
    from rightsize.models.zoo import get_entry

    entry = get_entry(model)
    half = precision in ("bf16", "fp16")
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    t0 = time.perf_counter()
    _, trace = trace_memory(entry, mode=mode, batch_size=batch, compute=precision, amp=half and mode == "train")  # type: ignore[arg-type]
    estimate_s = time.perf_counter() - t0
    torch.manual_seed(0)
    net = entry.build()
    x = entry.example_input(batch)
    y = entry.example_labels(x)
    if mode == "infer":
        net = net.to(dtype) if half else net
        with torch.no_grad(), LiveTensorTracker() as live:
            live.track(x, "input")
            net(x)
    else:
        amp = torch.autocast("cpu", dtype=dtype) if half else contextlib.nullcontext()
        net.train()
        with LiveTensorTracker() as live:
            for t in (x, y):
                live.track(t, "input")
            with amp:
                loss = net.loss(x, y)
            loss.backward()
            del loss
    quantity = "train fwd+bwd peak" if mode == "train" else "infer peak"
    return _row(model, f"{quantity} (tensors)", precision, batch, trace.peak_live_bytes, live.peak_bytes, estimate_s)


def infer_peak_row(model: str, precision: str, batch: int) -> dict[str, Any]:
    """Estimated peak above the weights vs RSS peak above baseline of a real no_grad forward."""
    import torch

    from rightsize.estimate.memory_estimate import estimate_memory
    from rightsize.measure.memory import RssPeakTracker
    from rightsize.models.zoo import get_entry

    t0 = time.perf_counter()
    est = estimate_memory(model, mode="infer", precision=precision, batch_size=batch, device="cpu", advise=False)
    estimate_s = time.perf_counter() - t0
    entry = get_entry(model)
    net = entry.build()
    if precision != "fp32":
        net = net.to(torch.bfloat16 if precision == "bf16" else torch.float16)
    x = entry.example_input(batch)
    with torch.no_grad():
        net(x)  # warm-up: oneDNN primitive caches stay out of the measured peak
        with RssPeakTracker() as rss:
            out = net(x)
    del out
    return _row(model, "infer peak (RSS)", precision, batch, est.total_bytes - est.breakdown["weights"],
                rss.peak_above_baseline_bytes, estimate_s)  # fmt: skip


def _row(model: str, quantity: str, precision: str, batch: int, est: int, meas: int, est_s: float) -> dict[str, Any]:
    return {
        "model": model, "quantity": quantity, "precision": precision, "batch": batch,
        "estimated_mib": round(est / MIB, 1), "measured_mib": round(meas / MIB, 1),
        "error_pct": round(100.0 * (est - meas) / meas, 2) if meas else None, "estimate_s": round(est_s, 2),
    }  # fmt: skip


def memory_rows(batches: tuple[int, ...] = (8, 32), include_rss: bool = False) -> list[dict[str, Any]]:
    """Estimated vs measured rows. The RSS rows are indicative (allocator noise), so they are left out
    unless asked for: ``estimate_accuracy.py`` summarises every row it gets."""
    # RSS rows first: the heap of a process that already ran the other rows inflates RSS peaks.
    rows = [infer_peak_row(m, "fp32", 8) for m in MODELS] if include_rss else []
    rows += [train_activation_row(m, p, b) for m in MODELS for b in batches for p in ("fp32", "bf16")]
    rows += [tensor_peak_row(m, "train", p, 8) for m in MODELS for p in ("fp32", "bf16")]
    rows += [tensor_peak_row(m, "infer", "fp32", 8) for m in MODELS]
    return rows


ACCEPTANCE = (
    ("llama-7b", "--mode", "infer", "--precision", "fp16", "--batch", "1", "--seq", "2048"),
    ("llama-1b", "--mode", "infer", "--precision", "fp16", "--batch", "1", "--tiers", "builtin"),
)


def acceptance_rows() -> list[dict[str, Any]]:
    """Run the CLI as a user does; the child's max RSS shows that no weights were allocated."""
    import resource
    import subprocess
    import sys

    rows = []
    for args in ACCEPTANCE:
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "rightsize", "memory", *args, "--json"],
                             capture_output=True, text=True, check=True)  # fmt: skip
        wall_s = time.perf_counter() - t0
        est = json.loads(out.stdout)
        rows.append({
            "command": " ".join(args), "wall_s": round(wall_s, 1), "total_gib": est["total_gib"], "tier": est["tier"],
            "children_max_rss_mib": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024),
        })  # fmt: skip
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, float]:
    errs = [abs(r["error_pct"]) for r in rows if r["error_pct"] is not None]
    return (
        {"n": len(errs), "median_abs_error_pct": statistics.median(errs), "worst_abs_error_pct": max(errs)}
        if errs
        else {}
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="batch 8 only")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    accept = acceptance_rows()
    rows = memory_rows((8,) if args.quick else (8, 32), include_rss=True)
    train = [r for r in rows if r["quantity"] == "train activations"]
    tensors = [r for r in rows if "RSS" not in r["quantity"]]
    out = {
        "acceptance": accept,
        "rows": rows,
        "train_activations": summary(train),
        "tensor_rows": summary(tensors),
        "all": summary(rows),
    }
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    for a in accept:
        print(f"rightsize memory {a['command']}: {a['total_gib']:.2f} GiB, {a['tier']}, {a['wall_s']:.1f} s, "
              f"max RSS of the children so far {a['children_max_rss_mib']} MiB")  # fmt: skip
    print()
    print(f"{'model':<11} {'quantity':<29} {'prec':<5} {'batch':>5} {'estimated MiB':>14} {'measured MiB':>13} "
          f"{'error %':>8} {'est s':>6}")  # fmt: skip
    for r in rows:
        err = f"{r['error_pct']:+8.2f}" if r["error_pct"] is not None else f"{'n/a':>8}"
        print(f"{r['model']:<11} {r['quantity']:<29} {r['precision']:<5} {r['batch']:>5} {r['estimated_mib']:>14.1f} "
              f"{r['measured_mib']:>13.1f} {err} {r['estimate_s']:>6.1f}")  # fmt: skip
    for name, s in (("train activations", out["train_activations"]), ("tensor rows", out["tensor_rows"]),
                    ("all rows", out["all"])):  # fmt: skip
        if s:
            median, worst = s["median_abs_error_pct"], s["worst_abs_error_pct"]
            print(f"{name}: n={s['n']} median |error| {median:.2f}%  worst {worst:.2f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
