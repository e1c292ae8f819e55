"""Offline batch inference with the zoo model: every item read, preprocessed, inferred and written once.

    result = run_pipeline(workload, items=100_000)                      # local multiprocessing
    result = run_pipeline(workload, items=100_000, ray_address="auto")  # Ray Data actors

The driver writes every output batch (``--output`` file, else a temporary Parquet file), checks
that the ids it saw are exactly the ids it sent (no item lost or processed twice), sums each
stage's time, and projects the full job's runtime and cost on the catalog's instances.
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from rightsize.cluster.engines import EngineRun, PipelinePlan, run_local, run_ray
from rightsize.cluster.items import Batch, ItemSpec
from rightsize.cluster.stages import STAGES, InferSpec, stage_totals
from rightsize.errors import SpecError, UnsupportedError, print_stop
from rightsize.measure.config import SUPPORTED
from rightsize.models import workload_model
from rightsize.spec import Workload

DEFAULT_FULL_ITEMS = 1_000_000  # projected job size without --full-items or targets.batch.items (the seed's 1M texts)


@dataclass(frozen=True)
class IdCheck:
    expected: int
    seen: int  # output rows
    unique: int
    missing: int  # expected ids never seen
    duplicated: int  # output rows beyond the first for an id
    unexpected: int  # ids seen that were never sent

    @property
    def exactly_once(self) -> bool:
        return self.missing == 0 and self.duplicated == 0 and self.unexpected == 0 and self.seen == self.expected


def check_ids(seen: np.ndarray, expected: np.ndarray) -> IdCheck:
    uniq = np.unique(seen)
    exp = np.unique(expected)
    return IdCheck(
        expected=len(expected), seen=len(seen), unique=len(uniq), missing=len(np.setdiff1d(exp, uniq)),
        duplicated=int(len(seen) - len(uniq)), unexpected=len(np.setdiff1d(uniq, exp)),
    )  # fmt: skip


class ResultWriter:
    """Appends ``id, label, score`` rows to a Parquet or JSONL file.

    Rows go to a partial file beside ``path``; ``close(keep=True)`` renames it over ``path`` once the run has
    finished, ``close()`` alone removes it. A run stopped half-way (Ctrl-C, a crash) leaves an existing ``path``
    as it was: it had been emptied the moment the run started."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._parquet: Any = None
        self._jsonl: Any = None
        suffix = path.suffix.lower()
        if suffix not in (".parquet", ".jsonl", ".ndjson"):
            raise SpecError("--output", f"must end in .parquet or .jsonl, got {path.name!r}")
        self.partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
        if suffix == ".parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            schema = pa.schema([("id", pa.int64()), ("label", pa.int64()), ("score", pa.float32())])
            self._parquet = pq.ParquetWriter(self.partial, schema)
            self._parquet.write_table(schema.empty_table())  # pyarrow's one-time setup (~0.3 s) outside the timed stage
            self._pa, self._schema = pa, schema
        else:
            self._jsonl = self.partial.open("w")

    def write(self, batch: Batch) -> None:
        ids, labels, scores = batch["id"], batch["label"], batch["score"]
        try:
            if self._parquet is not None:
                cols = [self._pa.array(ids, self._pa.int64()), self._pa.array(labels, self._pa.int64()),
                        self._pa.array(scores, self._pa.float32())]  # fmt: skip
                self._parquet.write_table(self._pa.Table.from_arrays(cols, schema=self._schema))
            else:  # a non-finite score is null: "nan" is not JSON
                self._jsonl.writelines(
                    f'{{"id": {int(i)}, "label": {int(lab)}, "score": {_json_number(float(s))}}}\n'
                    for i, lab, s in zip(ids, labels, scores, strict=True)
                )
        except OSError as exc:  # a full disk: one line (the partial file goes in close)
            raise self._cannot(exc) from None

    def _cannot(self, exc: OSError) -> SpecError:
        return SpecError("--output", f"cannot write {str(self.path)!r} ({exc.strerror or exc}); an existing file "
                         "was left as it was: free some space or pass another path")  # fmt: skip

    def close(self, keep: bool = False) -> None:
        """Finish the file; ``keep``: it becomes ``path`` (else the partial file is removed, also when finishing
        it fails: a full disk had left the partial file behind, with a 60-line traceback)."""
        try:
            if self._parquet is not None:
                self._parquet.close()
            if self._jsonl is not None:
                self._jsonl.close()
            if keep:
                os.replace(self.partial, self.path)
        except OSError as exc:
            self.partial.unlink(missing_ok=True)
            if keep:
                raise self._cannot(exc) from None
        finally:
            if not keep:
                self.partial.unlink(missing_ok=True)


def _json_number(x: float) -> str:
    return f"{x:.6g}" if math.isfinite(x) else "null"


@dataclass
class PipelineResult:
    name: str
    model: str
    engine: str  # local | ray
    device: str
    precision: str
    batch_size: int
    workers: int
    threads_per_worker: int | None
    items: int  # items written
    wall_s: float
    throughput_items_per_s: float
    stages: dict[str, dict[str, float]]  # {stage: {"wall_s", "cpu_s"}} summed over workers
    ids: IdCheck
    output_path: str | None  # None: written to a temporary file, then removed
    cluster: dict[str, Any] | None = None
    # {stage: {"wall_s", "cpu_s"}} paid once a run, not per item (the input file's imports and reader setup): out of
    # ``stages`` and of the plan, which scales the per-item part
    fixed_stages: dict[str, dict[str, float]] = field(default_factory=dict)
    full_items: int | None = None
    plan: Any = None  # the full job's PlanResult (rightsize.plan), set by rightsize.workflows.pipeline
    notes: list[str] = field(default_factory=list)

    @property
    def exactly_once(self) -> bool:
        return self.ids.exactly_once

    def to_dict(self) -> dict[str, Any]:
        d = asdict(replace(self, plan=None))
        d["ids"]["exactly_once"] = self.exactly_once
        d["plan"] = self.plan.to_dict() if self.plan is not None else None
        return d


LOCAL_WORKERS_PER_CORE = 4  # past this many processes a core, local workers only take turns on it
WORKER_BYTES = 300 * 2**20  # one local worker: torch imported (~150 MiB resident) and a small model built


def most_local_workers(cores: int) -> int:
    """The most local worker processes ``pipeline`` starts: LOCAL_WORKERS_PER_CORE a core, and no more than this
    machine's available memory holds at WORKER_BYTES each."""
    import psutil

    return max(1, min(LOCAL_WORKERS_PER_CORE * cores, int(psutil.virtual_memory().available // WORKER_BYTES)))


def make_plan(workload: Workload, *, items: int, input_path: str | None, ray: bool, workers: int | None,
              batch_size: int | None, device: str | None, precision: str | None) -> PipelinePlan:  # fmt: skip
    """The engine's plan from the spec and the command's options (validated)."""
    entry = workload_model(workload)
    if entry.meta_only:
        raise UnsupportedError(f"{workload.model} is too large to run here; pick a smaller model for a pipeline")
    device = device or workload.devices[0]
    if device not in ("cpu", "cuda"):
        raise SpecError("--device", f"must be cpu or cuda, got {device!r}")
    supported = SUPPORTED["inference"][device]
    precision = precision or next((p for p in workload.precisions if p in supported), None)
    if precision not in supported:
        choices = ", ".join(sorted(supported))  # "fp12 ... use one of ['bf16', ...]" read as if fp12 existed
        known = {p for modes in SUPPORTED.values() for ps in modes.values() for p in ps}
        what = (f"none of the spec's precisions ({', '.join(workload.precisions)}) runs inference on {device}"
                if precision is None else f"{precision!r} is not a precision rightsize runs" if precision not in known
                else f"{precision} inference is not supported on {device}")  # fmt: skip
        raise SpecError("--precision", f"{what}; use one of {choices}")
    if items < 1:
        raise SpecError("--items", f"must be >= 1, got {items}")
    shape = entry.sample_shape(workload.input.seq_len, workload.input.image_size, workload.tiny)
    kind = entry.kind
    spec = ItemSpec(
        kind=kind, seq_len=shape[0] if kind == "tokens" else 1, vocab=entry.input_vocab(workload.tiny),
        image_size=shape[-1] if kind == "image" else 1, features=math.prod(shape) if kind == "features" else 1,
    )  # fmt: skip
    cores = os.cpu_count() or 1
    most = most_local_workers(cores) if not ray else 0
    if workers is None and not ray:  # local: one process per core (the seed's CPU multiprocessing), memory allowing
        workers = 1 if device == "cuda" else min(cores, most)
    # --workers 1024 had started 1024 processes and filled the 24 GiB machine's memory
    if workers is not None and not ray and workers > most:
        raise SpecError("--workers", f"{workers} local processes on {cores} cores: each imports torch and builds the "
                        f"model (~{WORKER_BYTES / 2**20:.0f} MiB or more), and past {LOCAL_WORKERS_PER_CORE} a core "
                        f"they only take turns; at most {most} here: leave it out for one per core, or use "
                        "--ray")  # fmt: skip
    threads = None if device == "cuda" else max(1, cores // workers) if workers and not ray else 1
    infer = InferSpec(
        workload.model, workload.tiny, device, precision, batch_size or max(workload.batch_sizes), threads,
        tuple(workload.input.shape) if workload.input.shape else None,
    )  # fmt: skip
    return PipelinePlan(spec, infer, items, workers or 0, input_path)


def run_pipeline(
    workload: Workload,
    *,
    items: int = 10_000,
    input_path: str | Path | None = None,
    output_path: str | Path | None = None,
    ray_address: str | None = None,
    workers: int | None = None,
    batch_size: int | None = None,
    device: str | None = None,
    precision: str | None = None,
    full_items: int | None = None,
) -> PipelineResult:
    """Run the pipeline locally (``ray_address`` None) or on Ray and check ids; ``full_items`` is the job
    size the caller projects to (``rightsize.workflows.pipeline`` costs it)."""
    plan = make_plan(
        workload, items=items, input_path=str(input_path) if input_path else None, ray=ray_address is not None,
        workers=workers, batch_size=batch_size, device=device, precision=precision,
    )  # fmt: skip
    if ray_address is None and plan.infer.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise UnsupportedError("--device cuda: this machine has no CUDA device; use --device cpu or --ray")
    tmp = None if output_path else tempfile.TemporaryDirectory(prefix="rightsize-pipeline-")
    out = Path(output_path) if output_path else Path(tmp.name if tmp else ".") / "out.parquet"
    out.parent.mkdir(parents=True, exist_ok=True)  # --output in a new folder (check_writable made none)
    writer = ResultWriter(out)
    seen: list[np.ndarray] = []
    totals: dict[str, dict[str, float]] = {s: {"wall_s": 0.0, "cpu_s": 0.0} for s in STAGES}

    def sink(batch: Batch) -> None:
        w0, c0 = time.perf_counter(), time.process_time()
        writer.write(batch)
        totals["write"]["wall_s"] += time.perf_counter() - w0
        totals["write"]["cpu_s"] += time.process_time() - c0
        seen.append(np.asarray(batch["id"], dtype=np.int64))
        for stage, t in stage_totals(batch).items():
            for k, v in t.items():
                totals[stage][k] += v

    finished = False
    try:
        run = run_ray(plan, sink, ray_address) if ray_address is not None else run_local(plan, sink)
        finished = True
    except KeyboardInterrupt:  # it had said "interrupted" and nothing of what was done or kept
        done = sum(len(ids) for ids in seen)
        where = f"{str(output_path)!r} is left as it was" if output_path else "nothing is kept"
        of = "" if plan.input_path else f" of {plan.n_items:,}"  # a file's rows are counted as they are read
        print_stop(f"interrupted after {done:,}{of} items: {where} (an unfinished run writes no output) and "
                   "nothing is stored")  # fmt: skip
        raise
    finally:
        writer.close(keep=finished)
        if tmp is not None:
            tmp.cleanup()
    return _result(workload, plan, run, totals, seen, output_path, full_items)


def _result(workload: Workload, plan: PipelinePlan, run: EngineRun, totals: dict[str, dict[str, float]],
            seen: list[np.ndarray], output_path: str | Path | None,
            full_items: int | None) -> PipelineResult:  # fmt: skip
    for stage, t in run.driver_stages.items():
        for k, v in t.items():
            totals[stage][k] += v
    ids = np.concatenate(seen) if seen else np.zeros(0, dtype=np.int64)
    expected = run.expected_ids if run.expected_ids is not None else np.arange(plan.n_items, dtype=np.int64)
    res = PipelineResult(
        name=workload.name, model=workload.model, engine=run.engine, device=plan.infer.device,
        precision=plan.infer.precision, batch_size=plan.infer.batch_size, workers=run.workers,
        threads_per_worker=plan.infer.threads, items=len(ids), wall_s=run.wall_s,
        throughput_items_per_s=len(ids) / run.wall_s if run.wall_s > 0 else 0.0, stages=totals,
        ids=check_ids(ids, expected), output_path=str(output_path) if output_path else None, cluster=run.cluster,
        fixed_stages=run.fixed_stages,
    )  # fmt: skip
    res.notes.extend(run.notes)
    cores = os.cpu_count() or 1
    if run.engine == "local" and plan.infer.device == "cpu" and run.workers > cores:
        res.notes.append(f"{run.workers} worker processes on {cores} cores: they take turns on the CPU, so the "
                         f"items/s here is lower than {cores} would give; leave --workers out (one per "
                         "core)")  # fmt: skip
    batch_target = workload.targets.batch if workload.targets else None
    res.full_items = full_items or (batch_target.items if batch_target else DEFAULT_FULL_ITEMS)
    return res
