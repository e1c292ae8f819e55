"""``rightsize bench SPEC --ray auto|ADDRESS``: a sweep whose configs run as Ray tasks on the node types they target.

    1. expand the spec into configs; each (config, node type) becomes a job with a resource demand
       (``nodes.demand_for``: the node type's custom resource, a GPU for cuda, the node's CPUs)
    2. fingerprint every candidate node (a task pinned to it), so stored results can be reused
    3. submit the rest; a task lost with its worker or node is retried ``max_retries`` times by Ray,
       then recorded ``failed``; a job no alive node can run any more fails after ``lost_node_grace_s``
    4. store each result as it arrives (own transaction), tagged with its node's environment

The loop is the in-process sweep's (``rightsize.measure.sweep.drive``): reuse by ``stored_result``, a
stored result kept when a re-measurement does not beat it, results recorded through a ``SweepBook``.
``RayExecutor`` is only the scheduling: concurrent tasks on the nodes instead of one config after
another, each running ``measure_config`` (re-measured while contended). Returns the same ``SweepResult``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from rightsize.cluster.nodes import (
    Demand,
    Node,
    Target,
    check_node_types,
    demand_for,
    eligible_nodes,
    instance_type_of,
    nodes_from_ray,
    targets_of,
)
from rightsize.cluster.session import import_ray, ray_session
from rightsize.cluster.tasks import AttemptCounter, MeasureFn, fingerprint_task, measure_task
from rightsize.errors import RunFailedError
from rightsize.measure.config import BenchConfig, expand
from rightsize.measure.progress import sweep_progress
from rightsize.measure.sweep import Progress, Rates, SweepBook, SweepResult, drive
from rightsize.models import workload_model
from rightsize.profile import Environment, Measurement
from rightsize.spec import Workload
from rightsize.store import Store

FINGERPRINT_TIMEOUT_S = 300.0  # a fresh worker imports torch first; slow on a loaded node
POLL_S = 1.0  # how often the driver wakes to check for lost nodes


@dataclass
class Job:
    index: int  # position in the sweep (results are returned in this order)
    cfg: BenchConfig
    target: Target
    demand: Demand
    envs: list[Environment] = field(default_factory=list)  # of the nodes it may land on (after fingerprinting)
    unfit_since: float | None = None  # when no alive node could run it any more


def plan_jobs(configs: list[BenchConfig], targets: list[Target], nodes: list[Node]) -> tuple[list[Job], list[str]]:
    """Every (target, config) a node of the cluster can run; notes on those none can."""
    jobs: list[Job] = []
    notes: list[str] = []
    for target in targets:
        if target.resource and not any(n.alive and n.resources.get(target.resource, 0) > 0 for n in nodes):
            notes.append(
                f"node type {target.instance_type}: no alive node advertises resource {target.resource!r}; skipped"
            )
            continue
        for cfg in configs:
            demand = demand_for(nodes, target, cfg.device)
            if demand is None:
                what = "GPU" if cfg.device == "cuda" else "CPU"
                note = f"{cfg.device} configs on {target.label} skipped: no alive node of that type has a {what}"
                if note not in notes:
                    notes.append(note)
                continue
            jobs.append(Job(len(jobs), cfg, target, demand))
    return jobs, notes


def summary_env(envs: list[Environment]) -> Environment:
    """The SweepResult's env: the one environment, or a summary of several (``members`` lists their ids)."""
    distinct = list({e.id: e for e in envs}.values())
    if len(distinct) == 1:
        return distinct[0]
    names = ", ".join(e.instance_type or e.id for e in distinct)
    return Environment(
        id="cluster",
        cpu_model=f"Ray cluster, {len(distinct)} environments ({names})"
        if distinct
        else "Ray cluster (nothing measured)",
        gpus=tuple(g for e in distinct for g in e.gpus),
        members=tuple(e.id for e in distinct),
    )


def run_sweep_on_ray(
    workload: Workload,
    store: Store | None,
    *,
    address: str,
    fresh: bool = False,
    memory_limit_bytes: int | None = None,
    epochs: int | None = None,
    node_types: Mapping[str, str] | None = None,
    on_progress: Progress | None = None,
    progress: bool = True,
    max_retries: int = 2,
    lost_node_grace_s: float = 60.0,
    measure: MeasureFn | None = None,
) -> SweepResult:
    """Measure every config of ``workload`` on the Ray cluster at ``address`` ("auto": a running one or a local one).

    ``node_types`` (default: the spec's ``node_types``) maps instance types to Ray custom resources;
    each config is then measured once per instance type. ``measure`` replaces ``run_isolated``
    inside the task (tests). Failures are recorded, not raised; Ctrl-C keeps finished results.
    """
    entry = workload_model(workload)  # fail fast, before starting Ray
    types = check_node_types(node_types if node_types is not None else getattr(workload, "node_types", None))
    with ray_session(address) as session:
        ray = import_ray()
        nodes = nodes_from_ray(ray.nodes())
        has_cuda = any(n.alive and n.gpus >= 1 for n in nodes)
        configs, notes = expand(
            workload, entry.kind, env_id="", has_cuda=has_cuda, epochs=epochs, memory_limit_bytes=memory_limit_bytes
        )
        if entry.meta_only:
            notes.append(f"{workload.model} is too large to run here; use `rightsize memory` for it")
            configs = []
        jobs, job_notes = plan_jobs(configs, targets_of(types), nodes)
        result = SweepResult(run_id=None, env=Environment("cluster"))
        result.notes = ([session.note] if session.note else []) + notes + job_notes
        book = SweepBook(workload, store, result)
        executor = RayExecutor(ray, book, types, nodes, max_retries, lost_node_grace_s, measure)
        n_nodes = sum(1 for n in nodes if n.alive)
        with contextlib.ExitStack() as stack:
            book.callbacks = [on_progress] if on_progress else []
            if progress and jobs:
                book.callbacks.append(stack.enter_context(
                    sweep_progress(len(jobs), f"measuring on {n_nodes} node(s)", show_started=False)
                ))  # fmt: skip
            if jobs:
                executor.fingerprint_nodes(jobs)
                drive(jobs, store, book, executor, fresh)
        book.finish()
        by_id = {e.id: e for e in executor.node_envs.values()}
        result.env = summary_env([by_id[m.env_id] for m in result.measurements if m.env_id in by_id])
        return result


class RayExecutor:
    """Runs a sweep's jobs as Ray tasks on the node types they target (``drive`` does the rest)."""

    def __init__(self, ray: Any, book: SweepBook, types: dict[str, str], nodes: list[Node], max_retries: int,
                 grace_s: float, measure: MeasureFn | None) -> None:  # fmt: skip
        self.ray, self.book, self.types, self.nodes = ray, book, types, nodes
        self.max_retries, self.grace_s, self.measure_fn = max_retries, grace_s, measure
        self.node_envs: dict[str, Environment] = {}  # ray node id -> env

    # -- steps ------------------------------------------------------------------------------------

    def fingerprint_nodes(self, jobs: list[Job]) -> None:
        """One pinned task per candidate node: ``node_envs[node_id]`` (nodes that fail are noted and skipped),
        then each job's ``envs``: the environments of the nodes it may land on."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        remote = self.ray.remote(fingerprint_task)
        wanted = {n.node_id: n for j in jobs for n in eligible_nodes(self.nodes, j.target, j.cfg.device)}
        refs = {
            remote.options(
                num_cpus=0,
                max_retries=self.max_retries,
                scheduling_strategy=NodeAffinitySchedulingStrategy(nid, soft=False),
            ).remote(instance_type_of(node, self.types)): nid
            for nid, node in wanted.items()
        }
        for ref, nid in refs.items():
            try:
                out = self.ray.get(ref, timeout=FINGERPRINT_TIMEOUT_S)
                self.node_envs[nid] = Environment.from_dict(out["env"])
            except self.ray.exceptions.RayError as exc:  # GetTimeoutError is one too
                self.book.result.notes.append(f"node {nid[:8]}: fingerprint failed ({_first_line(exc)})")
        if not self.node_envs:
            raise RunFailedError("--ray: no node of the cluster answered; check `ray status`")
        for job in jobs:
            job.envs = self._target_envs(job)

    def _target_envs(self, job: Job) -> list[Environment]:
        nodes = eligible_nodes(self.nodes, job.target, job.cfg.device)
        return list(
            {
                self.node_envs[n.node_id].id: self.node_envs[n.node_id] for n in nodes if n.node_id in self.node_envs
            }.values()
        )

    def measure(
        self, jobs: Sequence[Job], priors: dict[int, Measurement], reused: Sequence[tuple[BenchConfig, Measurement]]
    ) -> Iterator[tuple[Job, Measurement, Environment]]:
        """Submit every job at once; yield each result as its task returns (or fails for good). Each task judges
        contention against the sweep's reference rate (``Rates``) from what the store already had: the
        results of jobs in flight arrive too late to serve."""
        rates = Rates()
        for cfg, m in reused:
            rates.add(cfg, m)
        remote = self.ray.remote(measure_task)
        counter = self.ray.remote(AttemptCounter).options(num_cpus=0).remote()  # retries leave a note
        pending: dict[Any, Job] = {}
        for job in jobs:
            d = job.demand
            ref = remote.options(
                num_cpus=d.num_cpus, num_gpus=d.num_gpus, resources=dict(d.resources), max_retries=self.max_retries,
                retry_exceptions=False,
            ).remote(job.cfg.to_dict(), job.target.instance_type, self.measure_fn, counter, job.index,
                     rates.best(job.cfg, priors.get(job.index)))  # fmt: skip
            pending[ref] = job
            self.book.started(job.cfg)
        try:
            yield from self._drain(pending)
        except (KeyboardInterrupt, GeneratorExit):  # Ctrl-C, or the sweep stopped (``drive``: a spec error)
            for ref in pending:
                with contextlib.suppress(Exception):
                    self.ray.cancel(ref, force=True)
            raise

    def _drain(self, pending: dict[Any, Job]) -> Iterator[tuple[Job, Measurement, Environment]]:
        next_check = time.monotonic() + POLL_S
        while pending:
            ready, _ = self.ray.wait(list(pending), num_returns=1, timeout=POLL_S)
            for ref in ready:
                job = pending.pop(ref)
                try:
                    out = self.ray.get(ref)
                except self.ray.exceptions.RayError as exc:
                    retries = f"{self.max_retries} retr{'y' if self.max_retries == 1 else 'ies'}"
                    yield self._failed(job, f"lost on the cluster after {retries}: {_first_line(exc)}")
                    continue
                env = Environment.from_dict(out["env"])
                self.node_envs.setdefault(out["node_id"], env)
                yield self._noted(job, Measurement.from_dict(out["measurement"]), env)
            if time.monotonic() >= next_check:
                yield from self._fail_unschedulable(pending)
                next_check = time.monotonic() + POLL_S

    def _fail_unschedulable(self, pending: dict[Any, Job]) -> Iterator[tuple[Job, Measurement, Environment]]:
        """Jobs that no alive node can run (their node type was lost) fail after the grace period."""
        self.nodes = nodes_from_ray(self.ray.nodes())
        now = time.monotonic()
        for ref, job in list(pending.items()):
            if any(job.demand.fits(n) for n in self.nodes):
                job.unfit_since = None
                continue
            job.unfit_since = job.unfit_since or now
            if now - job.unfit_since >= self.grace_s:
                with contextlib.suppress(Exception):
                    self.ray.cancel(ref)
                del pending[ref]
                yield self._failed(
                    job, f"no alive node offers {job.demand.describe()} for {job.target.label} (node lost?)"
                )

    # -- results ----------------------------------------------------------------------------------

    def _failed(self, job: Job, reason: str) -> tuple[Job, Measurement, Environment]:
        envs = self._target_envs(job) or [
            e for e in self.node_envs.values() if e.instance_type == job.target.instance_type
        ]
        env = envs[0] if envs else next(iter(self.node_envs.values()))
        extra = {"instance_type": job.target.instance_type} if job.target.instance_type else {}
        return self._noted(job, replace(job.cfg.result("failed", reason=reason), env_id=env.id, extra=extra), env)

    def _noted(self, job: Job, m: Measurement, env: Environment) -> tuple[Job, Measurement, Environment]:
        """The result, with a note when Ray had to retry its task."""
        attempt = int(m.extra.get("ray_attempt") or 1)
        if attempt > 1:
            tries = attempt - 1
            self.book.result.notes.append(
                f"{job.cfg.mode} {job.cfg.precision} b{job.cfg.batch_size} on {job.target.label}: its worker was lost "
                f"and Ray retried it {tries} time{'s' if tries > 1 else ''} before it finished"
            )
        return job, m, env


def _first_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return text.splitlines()[0][:300]
