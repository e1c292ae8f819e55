"""A rich progress bar for sweeps, on stderr so ``--json`` output stays clean."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from rightsize.cli._common import err_console
from rightsize.measure.config import BenchConfig
from rightsize.measure.sweep import Progress as ProgressCallback
from rightsize.profile import Measurement
from rightsize.spec import Workload


def _label(cfg: BenchConfig) -> str:
    threads = f" t{cfg.threads}" if cfg.threads else ""
    return f"{cfg.model} {cfg.mode} {cfg.device} {cfg.precision} b{cfg.batch_size}{threads}"


@contextmanager
def sweep_progress(workload: Workload) -> Iterator[ProgressCallback]:
    """Yield a callback for ``run_sweep``; the bar's total is the number of configs in the spec."""
    n_cpu = len(workload.threads) if "cpu" in workload.devices else 0
    total = len(workload.batch_sizes) * len(workload.precisions) * (n_cpu + ("cuda" in workload.devices))
    bar = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=False,
    )
    task = bar.add_task("measuring", total=total)

    def update(cfg: BenchConfig, m: Measurement | None, reused: bool) -> None:
        if m is None:
            bar.update(task, description=_label(cfg))
            return
        status = "reused" if reused else "contended" if m.extra.get("contended") else m.status
        bar.update(task, advance=1, description=f"{_label(cfg)} [{status}]")

    with bar:
        yield update
        bar.update(task, description="done", total=bar.tasks[0].completed)
