"""A rich progress bar across the cluster, on stderr so ``--json`` output stays clean."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from rightsize.measure.config import BenchConfig
from rightsize.measure.sweep import Progress as ProgressCallback
from rightsize.profile import Measurement


def label(cfg: BenchConfig, where: str | None = None) -> str:
    threads = f" t{cfg.threads}" if cfg.threads else ""
    at = f" @ {where}" if where else ""
    return f"{cfg.model} {cfg.device} {cfg.precision} b{cfg.batch_size}{threads}{at}"


@contextmanager
def cluster_progress(total: int, n_nodes: int, console: Console | None = None) -> Iterator[ProgressCallback]:
    """Yield a sweep callback ``(cfg, measurement or None, reused)`` that advances one bar of ``total`` jobs."""
    bar = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console or Console(stderr=True),
        transient=False,
    )
    task = bar.add_task(f"measuring on {n_nodes} node(s)", total=total)

    def update(cfg: BenchConfig, m: Measurement | None, reused: bool) -> None:
        if m is None:
            return  # submitted: the cluster decides when it starts
        where = m.extra.get("instance_type") or (str(m.extra.get("ray_node_id", ""))[:8] or None)
        status = "reused" if reused else m.status
        bar.update(task, advance=1, description=f"{label(cfg, where)} [{status}]")

    with bar:
        yield update
        bar.update(task, description="done")
