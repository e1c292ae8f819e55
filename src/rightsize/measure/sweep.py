"""A sweep: expand a spec into configs, reuse stored results, run the rest isolated, store each.

Each finished config is stored in its own transaction as soon as it ends, so Ctrl-C (or a crash
of the parent) keeps everything finished so far.

One sweep loop, ``drive``, with two executors: ``LocalExecutor`` here runs the configs one after another
on this machine (``run_sweep``); ``rightsize.cluster.bench`` runs them as Ray tasks on the node types
they target (``run_sweep_on_ray``). The loop decides reuse with ``stored_result``, keeps a stored result
that a re-measurement did not beat (``keeps_prior``) and records through a ``SweepBook`` (the run, the
environments, one transaction per result, progress); every executor measures a config with
``measure_config`` (re-measured while contended). So a config is reused, re-measured and stored the same
way wherever it runs; only the scheduling differs. A config that fails on an error in the spec (a user's factory
that raises or never returns) stops the sweep with that error: every other config would fail the same way.
"""

from __future__ import annotations

import contextlib
import sys
from collections import Counter
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from rightsize.errors import SpecError
from rightsize.measure.conditions import contended_by_rate
from rightsize.measure.config import BenchConfig, expand, fit_threads
from rightsize.measure.env import fingerprint
from rightsize.measure.quality import is_contended, slowdown
from rightsize.measure.runner import SPEC_ERROR, run_isolated
from rightsize.models import workload_model
from rightsize.profile import Environment, Measurement
from rightsize.spec import Workload
from rightsize.store import Store


@dataclass
class SweepResult:
    run_id: str | None
    env: Environment
    measurements: list[Measurement] = field(default_factory=list)
    reused: int = 0
    notes: list[str] = field(default_factory=list)
    interrupted: bool = False
    # the notes about timings taken or kept while the machine was busy (also in ``notes``): `plan` prints these
    busy_notes: list[str] = field(default_factory=list)


# A contended config is measured up to this many more times. Contention on a shared VM comes in
# bursts of seconds to minutes: two more tries usually find a quiet gap, and a sweep that stays
# busy throughout takes at most 3x as long, not forever.
RETRIES_WHEN_CONTENDED = 2

Runner = Callable[[BenchConfig], Measurement]  # default: runner.run_isolated


def _with_extra(m: Measurement, extra: dict[str, Any]) -> Measurement:
    return Measurement.from_dict(m.to_dict() | {"extra": {**m.extra, **extra}})


def judge(m: Measurement, best_gflops: float | None) -> Measurement:
    """``m`` with the sweep's rate rule applied: ``extra.gflops_vs_best`` (achieved over ``best_gflops``)
    and ``extra.contended`` also set when the achieved rate is under ``SLOW_VS_BEST`` of it."""
    achieved = m.extra.get("achieved_gflops")
    if m.status != "ok" or not best_gflops or not achieved:
        return m
    extra: dict[str, Any] = {"gflops_vs_best": round(float(achieved) / best_gflops, 4)}
    if contended_by_rate(float(achieved), best_gflops):
        extra["contended"] = True
    return _with_extra(m, extra)


def _rank(m: Measurement) -> tuple[bool, bool, float, float]:
    """Sort key of results of one config, best first: ok before failed, then uncontended, then the faster p50, then
    the smaller likely slowdown. A busy CPU only ever slows a timing, so the faster reading is the nearer one; two
    slowdown estimates may rest on different GFLOP/s references, or none (a 16x slow reading without a reference
    estimated 2.0x and beat a 3x slow one that had one)."""
    ok = m.status == "ok"
    p50 = m.latency_ms.p50 if ok and m.latency_ms is not None else 0.0
    return (not ok, is_contended(m), p50, slowdown(m) if ok else 0.0)


def measure_config(
    cfg: BenchConfig,
    retries: int = RETRIES_WHEN_CONTENDED,
    best_gflops: float | None = None,
    runner: Runner | None = None,
) -> Measurement:
    """One config in an isolated child; re-measured while it comes out contended, keeping the least
    contended attempt (``extra.attempts`` says how many ran; ``extra.contended`` stays True if it persisted).

    ``best_gflops``: the best rate this machine reached on the same work (``judge``), when known.
    ``runner`` measures one attempt (default ``run_isolated``, looked up at call time).
    """
    runner = runner or run_isolated
    best = judge(runner(cfg), best_gflops)
    attempts = 1
    while best.status == "ok" and is_contended(best) and attempts <= retries:
        again = judge(runner(cfg), best_gflops)
        attempts += 1
        if _rank(again) < _rank(best):
            best = again
    return _with_extra(best, {"attempts": attempts}) if best.status == "ok" else best


@dataclass(frozen=True)
class Stored:
    """What the store holds for one config before it is measured."""

    reuse: Measurement | None  # use this instead of measuring
    prior: Measurement | None  # a stored result to beat (contended) or to judge rates by
    note: str | None = None
    again: str | None = None  # why a stored config is measured again, for the "measuring N config(s)" line


BUSY = "stored while the machine was busy"
# Other work's share of this machine's cores (``conditions.others_busy_share``) at which a config stored while the
# machine was busy is reused instead of measured again: a contended reading's threshold is 15% of its time lost
# (``quality``), and at this share a new reading would be disturbed too (a plan run twice on a shared box had
# re-measured for 8 minutes and read different numbers).
STILL_BUSY = 0.3
FRESH = "--fresh"
OVER_CAP = "stored peak above --memory-limit"
UNDER_CAP = "failed under a tighter --memory-limit"


def busy_now() -> float | None:
    """Other work's share of this machine's cores right now (a 0.3 s look; None where unknown)."""
    from rightsize.measure.conditions import others_busy_share

    return others_busy_share()


def over_cap(m: Measurement, cfg: BenchConfig) -> bool:
    """Stored with a peak above the config's ``--memory-limit``: it cannot have run under the cap (RLIMIT_AS caps the
    address space, never smaller than the resident peak), so it is not reused as ok there."""
    cap, peak = cfg.memory_limit_bytes, m.peak_memory_bytes
    return bool(cap and peak and m.status == "ok" and peak > cap)


def stored_result(store: Store | None, cfg: BenchConfig, env_id: str, fresh: bool) -> Stored:
    """The reuse rule: an uncontended stored result is reused; a config that failed here before is
    reported from the store (no CUDA, out of memory, unsupported: it would fail again); ``fresh`` measures.

    A stored result whose peak is above the config's memory cap (``over_cap``) is measured again under the cap, as
    ``--fresh`` would: the simplest way to report what the cap does, and nothing to beat (a failure there is the
    answer, not a worse reading of the stored one)."""
    if store is None:
        return Stored(None, None)
    prior = store.find_measurement(cfg.key, env_id)
    if prior is not None and over_cap(prior, cfg):
        return Stored(None, None, again=OVER_CAP)
    if fresh:
        stored = prior is not None or store.find_measurement(cfg.key, env_id, ok_only=False) is not None
        return Stored(None, prior, again=FRESH if stored else None)
    if prior is not None and not is_contended(prior):
        return Stored(prior, prior)
    if prior is None:
        failed = store.find_measurement(cfg.key, env_id, ok_only=False)
        if failed is not None and failed.status == "failed":
            if roomier(failed, cfg):
                return Stored(None, None, again=UNDER_CAP)
            again = "`rightsize bench SPEC --fresh` tries it again"  # plan has no --fresh: bench's, for both
            return Stored(failed, None, f"{label(cfg)}: failed before ({failed.reason}); {again}")
    return Stored(None, prior, again=BUSY if prior is not None else None)


def roomier(failed: Measurement, cfg: BenchConfig) -> bool:
    """``failed`` ran under a ``--memory-limit`` tighter than ``cfg``'s (or ``cfg`` has none): it may run now."""
    cap, now = failed.extra.get("memory_limit_bytes"), cfg.memory_limit_bytes
    return cap is not None and (now is None or now > cap)


def keeps_prior(prior: Measurement | None, m: Measurement, fresh: bool) -> bool:
    """Keep what the store had instead of ``m``: ``m`` was timed on a busy CPU and is no better (a clean stored result
    is never replaced by a contended one, a contended one never by a slower one nor by one whose tail is much worse,
    ``--fresh`` or not); or, without ``fresh``, the stored one was busy and ``m`` is no better (it failed, say)."""
    if prior is None or prior.status != "ok":
        return False
    if m.status == "ok" and is_contended(m):
        return _rank(prior) <= _rank(m) or _worse_tail(m, prior)
    return not fresh and _rank(prior) <= _rank(m)


TAIL_SLACK = 1.25  # a busy re-reading's p95 may be this much worse than the stored one's and still replace it


def _worse_tail(m: Measurement, prior: Measurement) -> bool:
    """``m`` (timed on a busy CPU) reads a p95 more than TAIL_SLACK worse than ``prior``'s: a faster p50 alone had
    replaced a stored p95 of 0.69 ms with 33 ms, and the plan sized replicas from that tail."""
    new, old = m.latency_ms, prior.latency_ms
    return new is not None and old is not None and prior.status == "ok" and new.p95 > TAIL_SLACK * old.p95


class Rates:
    """Best achieved GFLOP/s per (mode, device, precision, threads) and batch size, of uncontended results.

    A config's reference is the best rate at the same or a smaller batch: per-call overhead makes
    small batches legitimately slower (tiny simplenet: 0.05 GFLOP/s at batch 1, 1.5 at 32), while a
    larger batch doing the same math at a third of a smaller batch's rate was disturbed.
    """

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str, str, int | None], list[tuple[int, float]]] = {}

    @staticmethod
    def _group(cfg: BenchConfig) -> tuple[str, str, str, int | None]:
        return (cfg.mode, cfg.device, cfg.precision, cfg.threads)

    @staticmethod
    def _clean_rate(m: Measurement | None) -> float | None:
        ok = m is not None and m.status == "ok" and not is_contended(m)
        return float(m.extra["achieved_gflops"]) if ok and m and m.extra.get("achieved_gflops") else None

    def add(self, cfg: BenchConfig, m: Measurement | None) -> None:
        if (rate := self._clean_rate(m)) is not None:
            self._seen.setdefault(self._group(cfg), []).append((cfg.batch_size, rate))

    def best(self, cfg: BenchConfig, prior: Measurement | None = None) -> float | None:
        """Reference for ``cfg``: this sweep's results so far, and ``prior`` (the same config stored earlier)."""
        rates = [r for b, r in self._seen.get(self._group(cfg), []) if b <= cfg.batch_size]
        if (rate := self._clean_rate(prior)) is not None:
            rates.append(rate)
        return max(rates, default=None)


Progress = Callable[[BenchConfig, Measurement | None, bool], None]  # (config, result or None=started, reused)


class SweepBook:
    """The bookkeeping every executor shares: results in sweep order, the ``bench`` run (started with the
    first measured result), each environment saved once, one transaction per result, progress callbacks."""

    def __init__(self, workload: Workload, store: Store | None, result: SweepResult,
                 callbacks: list[Progress] | None = None, saved_envs: Sequence[str] = ()) -> None:  # fmt: skip
        self.workload, self.store, self.result = workload, store, result
        self.callbacks = callbacks or []
        self._by_index: dict[int, Measurement] = {}
        self._saved_envs: set[str] = set(saved_envs)  # environments already in the store

    def started(self, cfg: BenchConfig) -> None:
        self._notify(cfg, None, False)

    def reused(self, index: int, cfg: BenchConfig, m: Measurement, note: str | None = None) -> None:
        self.result.reused += 1
        if note:
            self.result.notes.append(note)
        self._by_index[index] = m
        self._notify(cfg, m, True)

    def busy_note(self, note: str) -> None:
        self.result.notes.append(note)
        self.result.busy_notes.append(note)

    def measured(self, index: int, cfg: BenchConfig, m: Measurement, env: Environment) -> None:
        self._by_index[index] = m
        if self.store is not None:
            if env.id not in self._saved_envs:
                self.store.save_env(env)
                self._saved_envs.add(env.id)
            if self.result.run_id is None:  # a run is recorded once something is measured
                self.result.run_id = self.store.start_run(
                    "bench", name=self.workload.name, model=self.workload.model, env_id=env.id,
                    spec=self.workload.model_dump(mode="json"),
                )  # fmt: skip
            self.store.add_measurements(self.result.run_id, [m])
        self._notify(cfg, m, False)

    def finish(self) -> SweepResult:
        """The result with its measurements in sweep order; the run marked done or interrupted."""
        self.result.measurements = [self._by_index[i] for i in sorted(self._by_index)]
        if self.store is not None and self.result.run_id is not None:
            self.store.finish_run(self.result.run_id, "interrupted" if self.result.interrupted else "done")
        return self.result

    def _notify(self, cfg: BenchConfig, m: Measurement | None, reused: bool) -> None:
        for cb in self.callbacks:
            cb(cfg, m, reused)


class SweepJob(Protocol):
    """One config to measure, and the environments it may run on (its stored results are looked up on each)."""

    @property
    def index(self) -> int: ...  # position in the sweep: results are returned in this order
    @property
    def cfg(self) -> BenchConfig: ...
    @property
    def envs(self) -> Sequence[Environment]: ...


@dataclass
class LocalJob:
    index: int
    cfg: BenchConfig
    envs: Sequence[Environment]


class Executor(Protocol):
    def measure(
        self, jobs: Sequence[Any], priors: dict[int, Measurement], reused: Sequence[tuple[BenchConfig, Measurement]]
    ) -> Iterator[tuple[Any, Measurement, Environment]]:
        """Measure ``jobs`` (telling the book as each starts) and yield (job, result, its environment) as each
        finishes. ``priors``: stored results to judge rates by, per job index; ``reused``: results not measured."""
        ...


def drive(jobs: Sequence[SweepJob], store: Store | None, book: SweepBook, executor: Executor, fresh: bool) -> None:
    """The sweep loop: reuse what the store holds, measure the rest with ``executor``, record each result as it
    arrives. Ctrl-C stops it; everything recorded so far stays (``book.result.interrupted``). A result that failed
    on an error in the spec (``runner.SPEC_ERROR``) stops it too, raising that SpecError."""
    priors: dict[int, Measurement] = {}
    whys: dict[int, str] = {}  # why a stored config is measured again
    reused: list[tuple[BenchConfig, Measurement]] = []
    todo = []
    share: float | None = None  # others' share of this machine's cores, read once when a busy result is stored
    looked, kept_busy = False, 0
    for job in jobs:
        for env in job.envs:
            stored = stored_result(store, job.cfg, env.id, fresh)
            if stored.again == BUSY and stored.prior is not None:
                if not looked:
                    share, looked = busy_now(), True
                if share is not None and share >= STILL_BUSY:
                    stored, kept_busy = Stored(stored.prior, stored.prior), kept_busy + 1
            if stored.reuse is not None:
                book.reused(job.index, job.cfg, stored.reuse, stored.note)
                reused.append((job.cfg, stored.reuse))
                break
            if stored.prior is not None:
                priors.setdefault(job.index, stored.prior)
            if stored.again is not None:
                whys.setdefault(job.index, stored.again)
        else:
            todo.append(job)
    if kept_busy and share is not None:
        book.busy_note(
            f"{kept_busy} config(s) stored while the machine was busy, and other work holds {share:.0%} of its "
            "cores now: reused, not measured again (`rightsize bench SPEC --fresh` measures them when it is quiet)"
        )
    if todo:  # said on stderr whatever the output mode: --json and piped runs show no progress bar
        counts = Counter(whys[job.index] for job in todo if job.index in whys)
        why = "; ".join(f"{n} again: {reason}" for reason, n in counts.items())
        why = f" ({why})" if why else ""
        of = f" of {len(todo) + len(reused)}" if reused else ""  # the progress bar counts the stored ones as done
        print(f"rightsize: measuring {len(todo)}{of} config(s) on this machine{why}", file=sys.stderr, flush=True)
    measured = executor.measure(todo, priors, reused)
    try:
        for job, m, env in measured:
            refused = m.extra.get(SPEC_ERROR) if m.status == "failed" else None
            if refused:  # not stored: a fixed spec measures it, no --fresh needed
                raise SpecError(*refused)
            prior = priors.get(job.index)
            if prior is not None and prior.env_id == m.env_id and keeps_prior(prior, m, fresh):
                busy = "failed" if m.status != "ok" else "read no better while the machine was busy"
                book.reused(job.index, job.cfg, prior)
                book.busy_note(f"{label(job.cfg)}: measured again and {busy}; kept the stored result")
            else:
                book.measured(job.index, job.cfg, m, env)
    except KeyboardInterrupt:
        book.result.interrupted = True
    finally:
        if isinstance(measured, Generator):  # stop measuring: no config is started after the loop ends
            measured.close()


class LocalExecutor:
    """One config after another in an isolated child on this machine, each judged against the best rate this
    sweep reached on the same work (``judge``)."""

    def __init__(self, book: SweepBook, env: Environment) -> None:
        self.book, self.env = book, env

    def measure(
        self,
        jobs: Sequence[LocalJob],
        priors: dict[int, Measurement],
        reused: Sequence[tuple[BenchConfig, Measurement]],
    ) -> Iterator[tuple[LocalJob, Measurement, Environment]]:
        rates = Rates()
        for cfg, m in reused:
            rates.add(cfg, m)
        for job in jobs:
            self.book.started(job.cfg)
            m = measure_config(job.cfg, best_gflops=rates.best(job.cfg, priors.get(job.index)))
            rates.add(job.cfg, m)
            yield job, m, self.env


def run_sweep(
    workload: Workload,
    store: Store | None = None,
    *,
    fresh: bool = False,
    memory_limit_bytes: int | None = None,
    epochs: int | None = None,
    on_progress: Progress | None = None,
    env: Environment | None = None,
    on_wait: Callable[[], None] | None = None,
) -> SweepResult:
    """Measure every config of ``workload`` on this machine; failures are recorded, not raised.

    KeyboardInterrupt stops the sweep after killing the running child; the result says
    ``interrupted`` and holds everything finished (already stored). With a store, the sweep holds the
    store's sweep lock: a second sweep on the same store waits (``on_wait`` is told once, default: a
    line on stderr) and then reuses what the first one measured.
    """
    entry = workload_model(workload)  # fail fast on a bad model name
    workload, thread_notes = fit_threads(workload)
    env = env or fingerprint()
    configs, notes = expand(
        workload, entry.kind, env_id=env.id, has_cuda=bool(env.gpus), epochs=epochs,
        memory_limit_bytes=memory_limit_bytes,
    )  # fmt: skip
    notes = thread_notes + notes
    if entry.meta_only:
        notes.append(f"{workload.model} is too large to run here; use `rightsize memory` for it")
        configs = []
    result = SweepResult(run_id=None, env=env, notes=notes)
    if store is not None:
        store.save_env(env)
    book = SweepBook(workload, store, result, [on_progress] if on_progress else [], saved_envs=(env.id,))

    def waiting() -> None:
        result.notes.append("waited for another sweep on this store to finish (sweeps on one store take turns)")
        if on_wait is not None:
            on_wait()
        else:
            print("rightsize: another sweep is measuring on this store; waiting for it to finish", file=sys.stderr)

    lock = store.sweep_lock(waiting) if store is not None and configs else contextlib.nullcontext()
    with lock:
        jobs = [LocalJob(i, cfg, (env,)) for i, cfg in enumerate(configs)]
        drive(jobs, store, book, LocalExecutor(book, env), fresh)
    return book.finish()


def label(cfg: BenchConfig) -> str:
    """``inference cpu fp32 b8 t2``: one config in a note."""
    return f"{cfg.mode} {cfg.device} {cfg.precision} b{cfg.batch_size} t{cfg.threads or 'all'}"
