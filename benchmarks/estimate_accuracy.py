"""Accuracy of the estimator: projected vs measured throughput (leave-one-model-out), plus memory rows.

    .venv/bin/python benchmarks/estimate_accuracy.py            # from the committed calibration files
    .venv/bin/python benchmarks/estimate_accuracy.py --json

Throughput. The only hardware we can measure is this machine, so "another device" is this machine
with more cores: for each calibration model M, the fits are rebuilt *without M*, M's 1-thread
measurements become the profile of a 1-core machine, and its curve is projected onto an instance of
the same CPU family with the highest measured thread count; the measured times at that thread count
are the truth. Error % = (projected − measured) / measured; "in band" checks band_lo..band_hi.
With CUDA calibration files present the same is done for the GPU roofline (fit without M, predict M).

Memory. When ``benchmarks/memory_accuracy.py`` (the memory estimator's benchmark) is importable and
has ``memory_rows() -> list[dict]``, its rows are printed too.
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from rightsize.catalog import Catalog, Instance, load_catalog, match_cpu_family
from rightsize.estimate.calibration import (
    CalibrationSet,
    build_fits,
    gpu_time_ms,
    is_contended,
    load_calibration,
    thread_pairs,
)
from rightsize.estimate.projection import gpu_points_from_sets, project_curves
from rightsize.profile import Profile


def cpu_rows(sets: list[CalibrationSet], priors: dict[str, dict[str, Any]], catalog: Catalog) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for s in sets:
        ms = [m for m in s.measurements if m.device == "cpu" and m.status == "ok"]
        fam = match_cpu_family(catalog.cpus, s.env)
        if fam is None:
            continue
        pairs = thread_pairs(ms)
        for model in sorted({q.model for q in pairs}):
            fit = build_fits(sets, priors, exclude_model=model)
            mine = [q for q in pairs if q.model == model]
            n1, n2 = mine[0].n1, mine[0].n2
            low = tuple(m for m in ms if m.model == model and m.threads == n1)
            profile = Profile(model, low[0].mode, low[0].input, s.env | {"physical_cores": n1}, low)
            target = Instance(
                "bench", "-", f"{n2}-core", 2 * n2, 1.0, fam.name, None, 0, 1.0, None, None, "2025-01", "-"
            )
            cat = Catalog(catalog.accelerators, catalog.cpus, (target,))
            curves = [c for c in project_curves(profile, cat, calibration=fit) if c.device.startswith("cpu:")]
            for q in mine:
                c = next((c for c in curves if c.precision == q.precision), None)
                if c is None or q.batch_size not in c.batch_sizes:
                    continue
                pred = c.latency_ms[c.batch_sizes.index(q.batch_size)]
                kind = f"cpu {n1}->{n2} cores" + (" (contended)" if is_contended(q) else "")
                rows.append(_row(kind, model, q.precision, q.batch_size, pred, q.t2_ms, c.band_lo, c.band_hi))
    return rows


def gpu_rows(sets: list[CalibrationSet], priors: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    points = gpu_points_from_sets(sets, priors["gpu"])
    rows = []
    for model in sorted({p.model for p in points}):
        fit = build_fits(sets, priors, points, exclude_model=model).gpu
        for p in (p for p in points if p.model == model):
            eff = fit.eff_compute_max.get(p.precision, 0.4)
            over = fit.overhead_ms.get(p.mode, 1.0)
            pred = gpu_time_ms(
                p.flops, p.bytes_moved, p.peak_flops_per_s, p.bandwidth_gbps, eff, fit.t_half_ms, fit.eff_memory, over
            )
            rows.append(
                _row("gpu roofline", model, p.precision, p.batch_size, pred, p.latency_ms, fit.band_lo, fit.band_hi)
            )
    return rows


def _row(
    kind: str, model: str, prec: str, batch: int, pred: float, meas: float, lo: float, hi: float
) -> dict[str, Any]:
    # Throughput error equals the latency error inverted: report it on throughput (samples/s).
    err = (meas / pred - 1.0) * 100.0
    return {
        "kind": kind,
        "model": model,
        "precision": prec,
        "batch": batch,
        "measured_ms": meas,
        "projected_ms": pred,
        "throughput_error_pct": err,
        "in_band": pred * lo <= meas <= pred * hi,
        "band": [lo, hi],
    }


def memory_rows() -> list[dict[str, Any]]:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    try:
        mod = importlib.import_module("memory_accuracy")
    except ImportError:
        return []
    fn = getattr(mod, "memory_rows", None)
    return list(fn()) if callable(fn) else []


def summary(rows: list[dict[str, Any]], key: str) -> dict[str, float]:
    errs = [abs(r[key]) for r in rows if r.get(key) is not None]
    if not errs:
        return {}
    return {"n": len(errs), "median_abs_error_pct": statistics.median(errs), "worst_abs_error_pct": max(errs)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--calibration-dir", type=Path, default=None)
    ap.add_argument("--no-memory", action="store_true")
    args = ap.parse_args(argv)
    sets, priors = load_calibration(args.calibration_dir)
    catalog = load_catalog("")
    rows = cpu_rows(sets, priors, catalog) + gpu_rows(sets, priors)
    mem = [] if args.no_memory else memory_rows()
    out = {
        "throughput": rows,
        "throughput_summary": summary(rows, "throughput_error_pct"),
        "throughput_summary_uncontended": summary(
            [r for r in rows if "contended" not in r["kind"]], "throughput_error_pct"
        ),
        "in_band": sum(r["in_band"] for r in rows),
        "memory": mem,
        "memory_summary": summary(mem, "error_pct"),
        "notes": _notes(sets, rows),
    }
    if args.json:
        print(json.dumps(out, indent=2, default=str))
        return 0
    head = ("kind", "model", "prec", "batch", "measured ms", "projected ms", "thr err %")
    print("{:<28} {:<14} {:<5} {:>5} {:>12} {:>13} {:>10}  band".format(*head))
    for r in rows:
        lo, hi = r["band"]
        mark = "ok" if r["in_band"] else "MISS"
        print(
            f"{r['kind']:<28} {r['model']:<14} {r['precision']:<5} {r['batch']:>5} {r['measured_ms']:>12.2f} "
            f"{r['projected_ms']:>13.2f} {r['throughput_error_pct']:>+10.1f}  [{lo:.2f}, {hi:.2f}] {mark}"
        )
    s = out["throughput_summary"]
    if s:
        print(
            f"\nthroughput: n={s['n']} median |error| {s['median_abs_error_pct']:.1f}%  "
            f"worst {s['worst_abs_error_pct']:.1f}%  in band {out['in_band']}/{len(rows)}"
        )
    su = out["throughput_summary_uncontended"]
    if su and su["n"] < len(rows):
        print(
            f"uncontended rows only: n={su['n']} median |error| {su['median_abs_error_pct']:.1f}%  "
            f"worst {su['worst_abs_error_pct']:.1f}%  (contended: more threads ran >10% slower, i.e. shared cores)"
        )
    if mem:
        print("\nmemory (from benchmarks/memory_accuracy.py):")
        for r in mem:
            print("  " + "  ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items()))
        if out["memory_summary"]:
            ms = out["memory_summary"]
            print(f"memory: median |error| {ms['median_abs_error_pct']:.1f}%  worst {ms['worst_abs_error_pct']:.1f}%")
    for n in out["notes"]:
        print(f"note: {n}")
    return 0


def _notes(sets: list[CalibrationSet], rows: list[dict[str, Any]]) -> list[str]:
    notes = []
    if not any(r["kind"] == "gpu roofline" for r in rows):
        notes.append(
            "no CUDA calibration files: GPU projections use the cited prior "
            "(calibration/gpu_prior.json) with its wide band"
        )
    for s in sets:
        la = s.meta.get("load_average_before")
        if la:
            notes.append(f"{Path(s.path).name}: load average {la} while measuring")
    return notes


if __name__ == "__main__":
    raise SystemExit(main())
