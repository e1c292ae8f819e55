"""The GPU projection against real runs on a GPU this project does not own (benchmarks/gpu/results/*/).

    .venv/bin/python benchmarks/gpu_vs_device.py            # every run under benchmarks/gpu/results/

Each run directory holds what ``benchmarks/gpu/run_on_device.sh`` measured on a lent GPU machine:
``measurements.json`` (``rightsize bench`` of zoo models, batch 1-256, fp32/fp16/bf16, inference and training,
with the machine's fingerprint) and ``llm_steps.json`` (our decoder's eager prefill and decode steps).

Nothing is fitted to these runs: the encoder/CNN rows are projected by the shipped time model
(``calibration/projection_fit.json``, fitted to published results only) from the model's traced ops, and
the LLM steps by ``llm.costs`` with ``engine: eager``. Prints per row the ratio projected / measured and,
per group, the median |error|, the worst factor and the share of rows inside the shipped GPU band. The converged
encoder/CNN timings' error is part of that band (``--write-reference`` writes them to
``catalog/data/reference/device_runs.csv``; estimate/bands.py ``evaluate``), so "in band" here is in-sample for
the band; ``benchmarks/projection_vs_published.py`` prints each run against a band built without it.

Measured rows whose timing did not converge (the median's CI wider than the spec's target) are shown
and counted apart: on a host-bound batch they swing by up to 2x between neighbouring batches.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "gpu" / "results"


def _summary(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Median |error|, worst factor and the share inside each row's band (``band``: its regime's, estimate/bands.py)."""
    ratios = [r["ratio"] for r in rows]
    errs = [abs(r - 1.0) for r in ratios]
    worst = max(max(r, 1 / r) for r in ratios)
    inside = sum(1 for r in rows if r["band"][0] <= 1 / r["ratio"] <= r["band"][1]) / len(rows)
    return {"n": len(ratios), "median_abs_error": statistics.median(errs), "worst_factor": worst, "in_band": inside}


def _print_summary(summary: dict[str, dict[str, float]]) -> None:
    print(f"{'group':<34}{'n':>4}{'median |err|':>14}{'worst':>8}{'in band':>9}")
    for k, s in summary.items():
        print(f"{k:<34}{s['n']:>4}{s['median_abs_error']:>14.1%}{s['worst_factor']:>7.2f}x{s['in_band']:>9.0%}")


def _read_run(run: Path) -> tuple[Any, Any]:
    """(the run's CalibrationSet, the catalog accelerator its GPU matches)."""
    from rightsize.catalog import load_catalog
    from rightsize.catalog.query import match_accelerator
    from rightsize.estimate.calibration import read_calibration

    measured = read_calibration(run / "measurements.json")
    assert measured is not None, run
    gpu = measured.env.gpus[0]
    acc = match_accelerator(gpu.name, load_catalog("").accelerators, gpu.memory_bytes)
    if acc is None:
        raise SystemExit(f"{run}: no catalog accelerator for {gpu.name}")
    return measured, acc


def encoder_rows(run: Path, models: set[str] | None = None, mode: str | None = None) -> list[dict[str, Any]]:
    """Projected vs measured for every ok measurement of the run (of ``models`` in ``mode`` when given), ms."""
    from rightsize.estimate.projection import load_projection_model
    from rightsize.estimate.reference import json_input, work_key
    from rightsize.estimate.timemodel import gpu_time_split_ms, regime_of
    from rightsize.estimate.work import trace_works

    measured, acc = _read_run(run)
    ms = [
        m for m in measured.measurements if (models is None or m.model in models) and (mode is None or m.mode == mode)
    ]
    model = load_projection_model()
    works = trace_works({(m.model, m.mode, json_input(m.input)) for m in ms})
    out = []
    for m in ms:
        work = works[work_key(m.model, m.mode, m.input)]
        device, host, _ = gpu_time_split_ms(work, m.batch_size, acc, m.precision, model.gpu)
        projected, regime = max(device, host), regime_of(device, host)
        band = model.band("gpu", regime)
        measured = m.latency_ms.p50
        out.append({"model": m.model, "mode": m.mode, "precision": m.precision, "batch": m.batch_size,
                    "device": acc.name, "measured_ms": measured, "projected_ms": projected,
                    "ratio": projected / measured, "converged": bool(m.extra.get("ci_converged", True)),
                    "regime": regime, "band": (band.lo, band.hi)})  # fmt: skip
    return out


REFERENCE_COLUMNS = ("id", "source", "model", "mode", "batch_size", "seq_len", "image_size", "precision",
                     "device_class", "device", "gpus", "cores", "threads", "software", "metric", "value", "source_url",
                     "source_title", "published", "notes", "instances", "clock_ghz")  # fmt: skip


def reference_rows(run: Path) -> list[dict[str, Any]]:
    """The run's converged encoder/CNN timings as rows of ``device_runs.csv`` (published.csv's columns): the real
    runs whose error under the fit joins the GPU band (estimate/bands.py ``evaluate``)."""
    measured, acc = _read_run(run)
    env = measured.env
    gpu = env.gpus[0]
    software = f"rightsize bench, PyTorch {env.torch} eager, CUDA {gpu.cuda}, driver {gpu.driver}"
    out = []
    for m in measured.measurements:
        if m.status != "ok" or m.device != "cuda" or not m.latency_ms or not m.extra.get("ci_converged", True):
            continue
        inp = "-".join(f"{k[0]}{v}" for k, v in sorted(m.input.items()))
        out.append({
            "id": f"{run.name}-{m.model}-{m.mode[:5]}-{m.precision}-{inp}-b{m.batch_size}", "source": run.name,
            "model": m.model, "mode": m.mode, "batch_size": m.batch_size, "seq_len": m.input.get("seq_len", ""),
            "image_size": m.input.get("image_size", ""), "precision": m.precision, "device_class": "gpu",
            "device": acc.name, "gpus": 1, "cores": "", "threads": "", "software": software, "metric": "latency_ms",
            "value": round(m.latency_ms.p50, 4), "source_url": f"benchmarks/gpu/results/{run.name}/measurements.json",
            "source_title": f"rightsize bench on a lent {gpu.name} ({env.cpu_model} host, {env.logical_cores} vCPUs)",
            "published": run.name[-10:], "notes": f"median of {m.latency_ms.n} timed batches, timing converged",
            "instances": "", "clock_ghz": "",
        })  # fmt: skip
    return out


def write_reference(runs: list[Path], path: Path) -> int:
    """Write ``device_runs.csv`` from ``runs``; the number of rows."""
    import csv

    rows = [r for run in runs for r in reference_rows(run)]
    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=REFERENCE_COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    return len(rows)


def llm_rows(run: Path) -> list[dict[str, Any]]:
    """Our decoder's eager steps against ``llm.costs`` (engine eager) for the run's GPU."""
    from rightsize.catalog import load_catalog
    from rightsize.catalog.query import match_accelerator
    from rightsize.llm.costs import project_step_costs
    from rightsize.llm.shape import DecoderShape

    path = run / "llm_steps.json"
    if not path.exists():
        return []
    data = json.loads(path.read_text(encoding="utf-8"))
    catalog = load_catalog("")
    acc = match_accelerator(data["env"]["gpu"], catalog.accelerators)
    if acc is None:
        return []
    out = []
    for r in data["runs"]:
        shape = DecoderShape.from_zoo(r["model"])
        costs = project_step_costs(shape, acc, r["precision"], engine="eager")
        for p in r["prefill"]:
            proj = costs.prefill_ms(p["tokens"])
            out.append({"model": r["model"], "step": f"prefill {p['tokens']}", "measured_ms": p["wall_ms"],
                        "projected_ms": proj, "ratio": proj / p["wall_ms"]})  # fmt: skip
        for d in r["decode"]:
            proj = costs.decode_ms(d["batch"], d["batch"] * (r["context"] + 1))
            out.append({"model": r["model"], "step": f"decode b={d['batch']}", "measured_ms": d["wall_ms"],
                        "projected_ms": proj, "ratio": proj / d["wall_ms"]})  # fmt: skip
    return out


def parse_runs(
    argv: list[str] | None, doc: str | None, write_reference: bool = False
) -> tuple[argparse.Namespace, list[Path]]:
    """The GPU benchmarks' command line: run directories (default: every run under results/) and --json (and
    --write-reference, this script's)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="*", type=Path, help="run directories (default: every one under results/)")
    ap.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    if write_reference:
        what = "write the runs' converged timings to catalog/data/reference/device_runs.csv and stop"
        ap.add_argument("--write-reference", action="store_true", help=what)
    args = ap.parse_args(argv)
    return args, args.runs or sorted(p for p in RESULTS.iterdir() if (p / "measurements.json").exists())


def main(argv: list[str] | None = None) -> int:
    args, runs = parse_runs(argv, __doc__, write_reference=True)
    from rightsize.estimate.projection import load_projection_model
    from rightsize.estimate.reference import device_runs_path

    if args.write_reference:
        n = write_reference(runs, device_runs_path())
        print(f"wrote {device_runs_path()}: {n} converged timings from {len(runs)} runs")
        return 0

    model = load_projection_model()
    band = model.band("gpu")  # the LLM steps' (no regime split for them)
    bands = {k: (model.band("gpu", k).lo, model.band("gpu", k).hi) for k in ("host", "device")}
    report: dict[str, Any] = {"band": [band.lo, band.hi], "bands": bands, "runs": {}}
    for run in runs:
        rows, steps = encoder_rows(run), llm_rows(run)
        for s in steps:
            s["band"] = (band.lo, band.hi)
        groups: dict[str, list[dict[str, Any]]] = {}
        for r in rows:
            key = f"{r['model']} {r['mode']}" + ("" if r["converged"] else " (not converged)")
            groups.setdefault(key, []).append(r)
        summary = {k: _summary(v) for k, v in sorted(groups.items())}
        summary["all converged"] = _summary([r for r in rows if r["converged"]])
        summary["all"] = _summary(rows)
        if steps:
            summary["llm eager steps"] = _summary(steps)
        report["runs"][run.name] = {"rows": rows, "llm": steps, "summary": summary}
        if args.json:
            continue
        ranges = ", ".join(f"{k}-bound x{lo:.2f}-x{hi:.2f}" for k, (lo, hi) in bands.items())
        print(f"== {run.name}: projected / measured (shipped fit; GPU band by regime: {ranges})")
        print(f"{'model':<11}{'mode':<10}{'prec':<6}{'batch':>6}{'measured ms':>13}{'projected ms':>14}{'ratio':>8}"
              "  regime")  # fmt: skip
        for r in rows:
            flag = "" if r["converged"] else "  not converged"
            print(f"{r['model']:<11}{r['mode']:<10}{r['precision']:<6}{r['batch']:>6}{r['measured_ms']:>13.2f}"
                  f"{r['projected_ms']:>14.2f}{r['ratio']:>8.2f}  {r['regime']}{flag}")  # fmt: skip
        for s in steps:
            print(f"{s['model']:<11}{s['step']:<22}{s['measured_ms']:>13.2f}{s['projected_ms']:>14.2f}"
                  f"{s['ratio']:>8.2f}")  # fmt: skip
        print()
        _print_summary(summary)
        print()
    pooled = [r for run in report["runs"].values() for r in run["rows"]]
    pooled_llm = [s for run in report["runs"].values() for s in run["llm"]]
    if pooled:
        report["summary"] = {
            "all runs, converged": _summary([r for r in pooled if r["converged"]]),
            "all runs": _summary(pooled),
            **{
                f"all runs, converged, {k}-bound": _summary([r for r in pooled if r["converged"] and r["regime"] == k])
                for k in bands
                if any(r["converged"] and r["regime"] == k for r in pooled)
            },
        }
        if pooled_llm:
            report["summary"]["all runs, llm eager steps"] = _summary(pooled_llm)
        if not args.json:
            print(f"== pooled over {len(report['runs'])} runs")
            _print_summary(report["summary"])
    if args.json:
        print(json.dumps(report, indent=1, default=lambda x: None if isinstance(x, float) and math.isnan(x) else x))
    return 0


if __name__ == "__main__":
    sys.exit(main())
