"""One progress bar for sweeps, local or on a cluster, on stderr so ``--json`` output stays clean.

with sweep_progress(config_count(workload)) as update:     # local sweep
    run_sweep(workload, store, on_progress=update)
with sweep_progress(n, f"measuring on {k} node(s)", show_started=False) as update:   # Ray
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

if TYPE_CHECKING:
    from rightsize.measure.config import BenchConfig
    from rightsize.profile import Measurement
    from rightsize.spec import Workload


def config_count(workload: Workload) -> int:
    """Configs a local sweep of ``workload`` runs (CPU thread counts x precisions x batches, plus CUDA); a SpecError
    before any bar is drawn when no thread count fits this machine (``fit_threads``)."""
    from rightsize.measure.config import fit_threads

    workload, _ = fit_threads(workload)
    n_cpu = len(workload.threads) if "cpu" in workload.devices else 0
    return len(workload.batch_sizes) * len(workload.precisions) * (n_cpu + ("cuda" in workload.devices))


def label(cfg: BenchConfig, where: str | None = None) -> str:
    threads = f" t{cfg.threads}" if cfg.threads else ""
    at = f" @ {where}" if where else ""
    return f"{cfg.model} {cfg.mode} {cfg.device} {cfg.precision} b{cfg.batch_size}{threads}{at}"


class SweepBar:
    """The callback ``sweep_progress`` yields: call it as a sweep's ``on_progress``; ``stop()`` when the sweep
    was interrupted, so the bar ends "stopped 2/6", not "done 2/2" (a finished sweep's total shrinks to what it
    ran: configs this machine cannot run are skipped with a note)."""

    def __init__(self, bar: Progress, task: TaskID, show_started: bool, name: str | None = None) -> None:
        self.bar, self.task, self.show_started = bar, task, show_started
        self.prefix = f"{name}: " if name else ""
        self.n_reused = 0
        self.stopped = False

    def __call__(self, cfg: BenchConfig, m: Measurement | None, reused: bool) -> None:
        if m is None:
            if self.show_started:
                self.bar.update(self.task, description=label(cfg))
            return
        self.n_reused += reused
        where = m.extra.get("instance_type") or (str(m.extra.get("ray_node_id", ""))[:8] or None)
        status = "reused" if reused else "contended" if m.extra.get("contended") else m.status
        self.bar.update(self.task, advance=1, description=f"{label(cfg, where)} [{status}]")

    def stop(self) -> None:
        self.stopped = True

    def close(self) -> None:
        if self.stopped:
            self.bar.update(self.task, description=f"{self.prefix}stopped")
            return
        # the stored results a sweep reused are named: a warm `plan` otherwise read as if it had measured them
        done = f"done ({self.n_reused} reused from the store)" if self.n_reused else "done"
        self.bar.update(self.task, description=self.prefix + done, total=self.bar.tasks[0].completed)


@contextmanager
def sweep_progress(
    total: int,
    description: str = "measuring",
    *,
    show_started: bool = True,
    console: Console | None = None,
    name: str | None = None,
) -> Iterator[SweepBar]:
    """Yield a sweep callback that advances one bar of ``total`` configs; ``show_started``: name the config
    being measured (a local sweep; on a cluster the scheduler decides when a submitted one starts); ``name``: the
    model the sweep measures, on its final line (a plan comparing engines drew two bars alike)."""
    bar = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console or Console(stderr=True),
        transient=False,
    )
    update = SweepBar(bar, bar.add_task(description, total=total), show_started, name)
    with bar:
        yield update
        update.close()
