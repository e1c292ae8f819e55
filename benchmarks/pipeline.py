"""Batch-inference pipeline: N synthetic items through a small zoo model, locally and on a local Ray cluster.

    .venv/bin/python benchmarks/pipeline.py                       # 100k items, simplenet, 2 workers
    .venv/bin/python benchmarks/pipeline.py --model distilbert --tiny --items 20000 --store store.sqlite

Prints, per engine, end-to-end throughput (processing wall time: workers, model loads and every
stage included; the Ray cluster's own start is shown apart as "call s"), per-stage CPU time, and
whether every item came out exactly once; then the projected cost of the full job (``--full-items``)
on the catalog's instances, from the local run. With ``--store`` holding a ``rightsize bench``
profile of the model, inference rates come from its ServiceCurves; otherwise from the placeholder.
"""

from __future__ import annotations

import argparse
import time

from rich.console import Console
from rich.table import Table

from rightsize.cli.plan import print_plan
from rightsize.cluster.pipeline import PipelineResult
from rightsize.spec import parse_spec
from rightsize.workflows.pipeline import run_and_project


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=100_000)
    ap.add_argument("--model", default="simplenet")
    ap.add_argument("--tiny", action="store_true", help="the model's tiny variant")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--workers", type=int, default=2, help="local processes and Ray actors")
    ap.add_argument(
        "--ray", default="auto", help="Ray address ('auto': a running cluster or a local one); 'none' to skip"
    )
    ap.add_argument("--full-items", type=int, default=5_000_000)
    ap.add_argument("--deadline-hours", type=float, default=8.0)
    ap.add_argument("--store", default=None, help="store with the model's bench profile (better projections)")
    args = ap.parse_args()

    workload = parse_spec({
        "name": f"bench-{args.model}", "model": args.model, "tiny": args.tiny, "input": {"seq_len": 64},
        "batch_sizes": [args.batch_size],
        "targets": {"batch": {"items": args.full_items, "deadline_hours": args.deadline_hours}},
    })  # fmt: skip
    store = None
    if args.store:
        from rightsize.store import Store

        store = Store(args.store)
    console = Console(width=160)
    runs: list[tuple[PipelineResult, float]] = []
    for address in [None] if args.ray == "none" else [None, args.ray]:
        t0 = time.perf_counter()
        res = run_and_project(workload, items=args.items, ray_address=address, workers=args.workers, store=store)
        runs.append((res, time.perf_counter() - t0))

    t = Table(title=f"{args.items:,} synthetic items through {args.model}{' (tiny)' if args.tiny else ''}, "
                    f"micro-batch {args.batch_size}", title_justify="left")  # fmt: skip
    for col in ("engine", "workers", "items", "wall s", "items/s", "call s", "read", "preproc", "infer", "write",
                "exactly once"):  # fmt: skip
        t.add_column(col, justify="left" if col == "engine" else "right")
    for res, call_s in runs:
        cpu = [f"{res.stages[s]['cpu_s']:.1f}" for s in ("read", "preprocess", "infer", "write")]
        rate = f"{res.throughput_items_per_s:,.0f}"
        once = "yes" if res.exactly_once else "[red]NO[/red]"
        t.add_row(
            res.engine, str(res.workers), f"{res.items:,}", f"{res.wall_s:.1f}", rate, f"{call_s:.1f}", *cpu, once
        )
    console.print(t)
    console.print(
        "stage columns: CPU seconds summed over workers; call s: the whole call (a Ray cluster start included)"
    )
    local = runs[0][0]
    if local.plan is not None:
        print_plan(local.plan, 12)
    for note in local.notes:
        console.print(f"note: {note}")


if __name__ == "__main__":
    main()
