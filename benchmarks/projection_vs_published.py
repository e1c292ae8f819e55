"""Projection vs published results, leave-one-source-out: can the projection be bet on?

    .venv/bin/python benchmarks/projection_vs_published.py              # shipped anchors (~1-2 min)
    .venv/bin/python benchmarks/projection_vs_published.py --measure    # re-measure the anchors here first

Every row of ``catalog/data/reference/published.csv`` (a published figure with its source URL and date)
is projected by time models fitted WITHOUT that row's source, from this project's local CPU profile of
the model (its traced ops; for CPU rows also its measured time here). Prints each row's ratio
projected/published, then per device class: median |error|, worst factor, the share of rows inside the
band (the band itself is built from these held-out errors, so this share is in-sample by construction), the
share inside a band built from the OTHER sources' errors only (out-of-source: how a source the band never saw
fares), and the median band width (hi/lo).

Targets (issue "Projections you can bet on"): median |error| <= 20%, worst <= 2x, >= 90% inside the band (both
readings), median band width <= x1.6. Exit code 1 when a target is missed (``--no-fail`` to only print).

Then the rows of ``published_checks.csv`` (published results on GPUs the product never plans: timm's own
benchmarks on GeForce RTX 3090/4090; and a 2021 eager run on a DGX A100 with PyTorch 1.7 / cuDNN 8.0.4, a stack
older than the reference set's; NVIDIA DeepLearningExamples' ResNet-50 table on a T4, kept out of the fit by rule,
docs/reference-set.md) are projected by the fit on ALL the reference rows, the
shipped model, which never saw them; they are printed apart, per source, and count toward no target: a check of
how far the model carries.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

# coverage_out_of_source: the same 90% asked of a band built without the row's own source (a new source's view)
TARGETS = {"median_abs_error": 0.20, "worst_factor": 2.0, "coverage": 0.90, "coverage_out_of_source": 0.90,
           "median_band_width": 1.6}  # fmt: skip


def _runs_summary(ev: Any) -> dict[str, dict[str, float]]:
    """Per real GPU run (device_runs.csv) and over all: median |error| and worst factor of the fit, the share inside
    the shipped band (which their own errors helped to set) and inside a band built without that run."""
    from rightsize.estimate.bands import band_for, bands_from

    out: dict[str, dict[str, float]] = {}
    groups = {src: [h for h in ev.runs if h.row.source == src] for src in sorted({h.row.source for h in ev.runs})}
    held_in = 0
    for src, hs in [*groups.items(), ("all runs", list(ev.runs))]:
        if not hs:
            continue
        inside = sum(
            1 for h in hs if (b := band_for(ev.bands, h.row.device_class, h.regime)) and b.lo <= 1 / h.ratio <= b.hi
        )
        if src != "all runs":
            other = bands_from([*ev.held, *(h for h in ev.runs if h.row.source != src)])
            held = sum(
                1 for h in hs if (b := band_for(other, h.row.device_class, h.regime)) and b.lo <= 1 / h.ratio <= b.hi
            )
            held_in += held
        else:
            held = held_in
        out[src] = {"n": len(hs), "median_abs_error": statistics.median(abs(h.ratio - 1) for h in hs),
                    "worst_factor": max(max(h.ratio, 1 / h.ratio) for h in hs), "in_band": inside / len(hs),
                    "in_band_without_it": held / len(hs)}  # fmt: skip
    return out


def _print_runs(runs: dict[str, dict[str, float]]) -> None:
    if not runs:
        return
    print()
    print("real GPU runs (device_runs.csv: rightsize bench on lent H100/H200 machines), projected by the fit on every")
    print("published row (never fitted to them); their errors join the GPU band:")
    for src, s in runs.items():
        print(f"  {src:<24} n={int(s['n']):>3} median |err| {s['median_abs_error']:.1%}, "
              f"worst {s['worst_factor']:.2f}x, inside the band {s['in_band']:.0%}, "
              f"inside a band built without that run {s['in_band_without_it']:.0%}")  # fmt: skip


def _measure_here(models: list[str], out_dir: Path) -> None:
    import calibrate_cpu  # scripts/calibrate_cpu.py

    for prec in (["fp32", "int8"],):
        calibrate_cpu.main(["--models", *models, "--precisions", *prec, "--batches", "1", "8", "--max-time", "2",
                            "--out", str(out_dir / "cpu-here.json")])  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reference", type=Path, default=None, help="published-results CSV (default: shipped)")
    ap.add_argument("--measure", action="store_true", help="measure the anchor models on this machine first")
    ap.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    ap.add_argument("--no-fail", action="store_true", help="exit 0 even when a target is missed")
    args = ap.parse_args(argv)

    from rightsize.catalog import load_catalog
    from rightsize.estimate.fitting import run_reference_evaluation
    from rightsize.estimate.reference import load_reference

    calibration = None
    if args.measure:
        rows = load_reference(args.reference)
        tmp = Path(tempfile.mkdtemp(prefix="rightsize-anchors-"))
        _measure_here(sorted({r.model for r in rows if r.device_class == "cpu"}), tmp)
        calibration = tmp
    catalog = load_catalog("")
    ev, rows, inputs = run_reference_evaluation(catalog, args.reference, calibration)
    summary = {dc: ev.summary(dc) for dc in ("gpu", "cpu")} | {"all": ev.summary()}
    checks = _checks(ev, catalog)
    verdict = {k: _check(summary["all"], k) for k in TARGETS}
    if args.json:
        out: dict[str, Any] = {
            "summary": summary, "targets": TARGETS, "met": verdict, "inputs": inputs,
            "bands": {k: b.to_dict() for k, b in ev.bands.items()},
            "rows": [{"id": h.row.id, "source": h.row.source, "published_ms": h.row.latency_ms,
                      "projected_ms": h.predicted_ms, "ratio": h.ratio, "regime": h.regime} for h in ev.held],
            "skipped": [{"id": r.id, "why": why} for r, why in ev.skipped],
            "checks": {"rows": checks, "summary": _check_summary(checks, ev)},
            "runs": _runs_summary(ev),
        }  # fmt: skip
        print(json.dumps(out, indent=1))
    else:
        _print(ev, summary, verdict)
        _print_runs(_runs_summary(ev))
        _print_checks(checks, ev)
    return 0 if args.no_fail or all(verdict.values()) else 1


def _checks(ev: Any, catalog: Any) -> list[dict[str, Any]]:
    """Every row of published_checks.csv projected by the fit on all reference rows (never fitted to them)."""
    from rightsize.estimate.reference import (
        checks_path,
        load_reference,
        needed_works,
        predict_row,
        row_regime,
        with_check_devices,
    )
    from rightsize.estimate.work import trace_works

    catalog = with_check_devices(catalog)
    rows = load_reference(checks_path())
    works = trace_works(needed_works(rows, []))
    out = []
    for r in rows:
        t = predict_row(r, works, {}, catalog, ev.fit.gpu, ev.fit.cpu)
        if t is not None:
            out.append({"id": r.id, "source": r.source, "device": r.device, "model": r.model, "mode": r.mode,
                        "batch": r.batch_size, "published_ms": r.latency_ms, "projected_ms": t,
                        "ratio": t / r.latency_ms, "device_class": r.device_class,
                        "regime": row_regime(r, works, catalog, ev.fit.gpu)})  # fmt: skip
    return out


def _check_summary(checks: list[dict[str, Any]], ev: Any) -> dict[str, float]:
    from rightsize.estimate.bands import band_for

    if not checks:
        return {"n": 0}
    ratios = [c["ratio"] for c in checks]
    errs = sorted(abs(x - 1.0) for x in ratios)
    inside = 0
    for c in checks:
        b = band_for(ev.bands, c["device_class"], c["regime"])
        inside += b is not None and b.lo <= 1.0 / c["ratio"] <= b.hi
    return {"n": len(checks), "median_abs_error": errs[len(errs) // 2] if len(errs) % 2 else
            (errs[len(errs) // 2 - 1] + errs[len(errs) // 2]) / 2,
            "worst_factor": max(max(ratios), 1.0 / min(ratios)), "in_band": inside / len(checks)}  # fmt: skip


def _print_checks(checks: list[dict[str, Any]], ev: Any) -> None:
    from rightsize.estimate.bands import band_for

    if not checks:
        return
    print()
    print(
        "checks, never fitted (published_checks.csv: GPUs the product does not plan, a stack older than the "
        "reference set's, NVIDIA's T4 table), projected by the shipped fit (ratio: projected / published time):"
    )
    for c in checks:
        b = band_for(ev.bands, c["device_class"], c["regime"])
        inside = "in" if b is not None and b.lo <= 1.0 / c["ratio"] <= b.hi else "OUT"
        print(f"{c['id'][:34]:<34} {c['device'][:22]:<22} {c['model'][:24]:<24} {c['mode'][:5]:<5} {c['batch']:>5} "
              f"{c['published_ms']:>9.2f}m {c['projected_ms']:>9.2f}m {c['ratio']:>6.2f} {inside}")  # fmt: skip
    for src in sorted({c["source"] for c in checks}):
        s = _check_summary([c for c in checks if c["source"] == src], ev)
        print(f"checks {src}: n={s['n']} median |err| {s['median_abs_error']:.1%}, worst {s['worst_factor']:.2f}x, "
              f"inside the shipped band {s['in_band']:.0%}")  # fmt: skip
    s = _check_summary(checks, ev)
    print(f"checks: n={s['n']} median |err| {s['median_abs_error']:.1%}, worst {s['worst_factor']:.2f}x, inside the "
          f"shipped band {s['in_band']:.0%} (no target: a check of how far the model carries)")  # fmt: skip


def _check(s: dict[str, float], key: str) -> bool:
    if not s.get("n"):
        return False
    v = s[key]
    return v >= TARGETS[key] if key.startswith("coverage") else v <= TARGETS[key]


def _print(ev: Any, summary: dict[str, dict[str, float]], verdict: dict[str, bool]) -> None:
    from rightsize.estimate.bands import band_for

    head = (
        f"{'row':<34} {'device':<22} {'model':<24} {'mode':<5} {'prec':<5} {'b':>4} "
        f"{'published':>10} {'projected':>10} {'ratio':>6} band {'(regime)'}"
    )
    print(head)
    print("-" * len(head))
    for h in sorted(ev.held, key=lambda h: (h.row.device_class, h.row.device, h.row.model, h.row.batch_size)):
        r = h.row
        b = band_for(ev.bands, r.device_class, h.regime)
        inside = "in" if b is not None and b.lo <= 1.0 / h.ratio <= b.hi else "OUT"
        dev = r.device + (f" {r.cpu_threads}c" if r.device_class == "cpu" else "")
        print(f"{r.id[:34]:<34} {dev[:22]:<22} {r.model[:24]:<24} {r.mode[:5]:<5} {r.precision:<5} {r.batch_size:>4} "
              f"{r.latency_ms:>9.2f}m {h.predicted_ms:>9.2f}m {h.ratio:>6.2f} {inside:<4} {h.regime}")  # fmt: skip
    print()
    print(f"{'class':<6} {'n':>3} {'median |err|':>13} {'worst':>7} {'in band':>8} {'out-of-source':>14} "
          f"{'band width':>11}  band (lo-hi)")  # fmt: skip
    for dc, s in summary.items():
        if not s.get("n"):
            continue
        b = ev.bands.get(dc)
        by_regime = any(k.startswith(f"{dc}:") for k in ev.bands)
        band = (
            f"x{b.lo:.2f}-x{b.hi:.2f}" + (" (over both regimes; by regime below)" if by_regime else "")
            if b
            else "per class"
        )
        oos = s["coverage_out_of_source"]
        print(f"{dc:<6} {int(s['n']):>3} {s['median_abs_error']:>12.1%} {s['worst_factor']:>6.2f}x "
              f"{s['coverage']:>7.0%} {oos:>13.0%} {s['median_band_width']:>10.2f}x  {band}")  # fmt: skip
    for key in sorted(k for k in ev.bands if ":" in k):
        b = ev.bands[key]
        print(f"  {key:<11} band x{b.lo:.2f}-x{b.hi:.2f} (width {b.hi / b.lo:.2f}x) from {b.n} rows: {b.source}")
    print(
        "in band: inside the printed band (its regime's: a GPU row host- or device-bound, a CPU row anchored or "
        "extrapolated), which every row's own held-out error helped to set; out-of-source: inside a band built from "
        "the other sources' errors only (the stricter test: how a new source fares)"
    )
    by_src: dict[str, list[float]] = {}
    for h in ev.held:
        by_src.setdefault(h.row.source, []).append(abs(h.ratio - 1))
    print()
    print(
        "per source (held out):",
        ", ".join(f"{k} n={len(v)} med {sorted(v)[len(v) // 2]:.0%}" for k, v in sorted(by_src.items())),
    )
    if ev.skipped:
        print(f"not projectable ({len(ev.skipped)}): " + "; ".join(f"{r.id} ({why})" for r, why in ev.skipped))
    print()
    for k, ok in verdict.items():
        op = ">=" if k.startswith("coverage") else "<="
        got = summary["all"].get(k, float("nan"))
        print(f"{'PASS' if ok else 'FAIL'}  {k}: {got:.3g} (target {op} {TARGETS[k]})")


if __name__ == "__main__":
    raise SystemExit(main())
