"""Two engines that push a pipeline's items through read -> preprocess -> infer and hand every output
batch to the driver's ``sink`` (which writes it): local multiprocessing, and Ray Data.

    local   a forkserver Pool of ``workers`` processes; each builds the model once and takes chunks
            of ids (or of the file's rows) through all three stages
    ray     Ray Data: ids (or the file's rows) as blocks -> map_batches(read) -> map_batches(preprocess)
            -> map_batches(RayPredictor) on an ActorPoolStrategy of CPU actors (num_cpus=threads) or GPU
            actors (num_gpus=1), each feeding its model micro-batches of ``batch_size``
"""

from __future__ import annotations

import logging
import math
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rightsize.cluster.items import Batch, ItemSpec, read_table, table_batch
from rightsize.cluster.stages import InferSpec, Predictor, preprocess_stage, read_stage
from rightsize.measure.runner import forkserver_context

Sink = Callable[[Batch], None]
BLOCK_BYTES = 64 * 1024**2  # target size of one chunk/block of items in memory (raw + preprocessed)
MAX_BLOCK_ITEMS = 4096


@dataclass(frozen=True)
class PipelinePlan:
    """Everything an engine needs (plain values, picklable)."""

    items: ItemSpec
    infer: InferSpec
    n_items: int  # synthetic items (ignored with input_path)
    workers: int  # local processes / Ray actors; 0 = decide from the cluster
    input_path: str | None = None


@dataclass
class EngineRun:
    engine: str  # local | ray
    workers: int
    wall_s: float  # from the start of processing (workers and models included) to the last batch
    driver_stages: dict[str, dict[str, float]] = field(default_factory=dict)  # stages timed in the driver
    fixed_stages: dict[str, dict[str, float]] = field(default_factory=dict)  # their time paid once, not per item
    cluster: dict[str, Any] | None = None  # ray: nodes, CPUs, GPUs, actor resources
    notes: list[str] = field(default_factory=list)
    expected_ids: np.ndarray | None = None  # from the input file (synthetic: 0..n-1)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("expected_ids")
        return d


def block_items(items: ItemSpec, batch_size: int, n_items: int, workers: int) -> int:
    """Items per chunk/block: at most about BLOCK_BYTES of raw + preprocessed data, at least 4 blocks per
    worker when there are enough items, and a multiple of the micro-batch."""
    if items.kind == "image":
        per_item = items.image_size**2 * 3 * 5  # uint8 pixels + float32 tensor
    elif items.kind == "tokens":
        per_item = items.seq_len * 8 * 2 + items.seq_len * 6  # int64 ids + text
    else:
        per_item = items.features * 4 * 2
    n = max(1, min(MAX_BLOCK_ITEMS, BLOCK_BYTES // per_item, math.ceil(n_items / (4 * max(workers, 1)))))
    return max(batch_size, n // batch_size * batch_size)


def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _since(t0: tuple[float, float]) -> dict[str, float]:
    return {"wall_s": time.perf_counter() - t0[0], "cpu_s": time.process_time() - t0[1]}


def read_input(plan: PipelinePlan, run: EngineRun) -> Any:
    """The input file's table. Its read time is split into a fixed part, paid once a run (imports, the reader's
    setup: ``run.fixed_stages["read"]``), and a per-item part (``run.driver_stages["read"]``, what the plan scales):
    a 60-row file had read at 5,924 µs/item, 0.36 CPU s of pyarrow's import spread over 60 rows, and the plan took
    that as every instance's feed rate (synthetic items: 8.5 µs/item). The fit is t(n) = a + b n from a one-row copy
    of the file (best of 3, after a read that pays the imports) and the whole file; a note when it cannot tell."""
    start = _clock()
    with tempfile.TemporaryDirectory(prefix="rightsize-read-") as tmp:
        one = _first_row(plan.input_path or "", Path(tmp))
        a = _best_read(one, plan.items) if one is not None else None
    t0 = _clock()
    table = read_table(plan.input_path or "", plan.items)
    t, total, n = _since(t0), _since(start), table.num_rows
    b = {k: max(t[k] - a[k], 0.0) / (n - 1) for k in t} if a is not None and n > 1 else {k: t[k] / n for k in t}
    run.driver_stages["read"] = {k: b[k] * n for k in b}
    run.fixed_stages["read"] = {k: max(total[k] - b[k] * n, 0.0) for k in total}
    if a is None or t["cpu_s"] - a["cpu_s"] < a["cpu_s"]:  # the rows' part is below one read's own setup
        one_row = f"one row reads in {a['cpu_s'] * 1e3:.1f} ms, " if a is not None else ""
        run.notes.append(
            f"input stages: the {n:,}-row file is too small to tell its read cost per item ({one_row}all {n:,} in "
            f"{t['cpu_s'] * 1e3:.1f} ms of CPU, after {run.fixed_stages['read']['cpu_s']:.2f} CPU s once for imports "
            f"and setup); the plan takes {b['cpu_s'] * 1e6:.1f} µs/item: give --input thousands of rows to measure it"
        )
    return table


def _first_row(path: str, tmp: Path) -> Path | None:
    """A copy of the file's first row in its format (None: it has none or cannot be read: ``read_table`` says why)."""
    src = Path(path)
    one = tmp / f"first{src.suffix.lower()}"
    try:
        if src.suffix.lower() == ".parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            first = next(pq.ParquetFile(src).iter_batches(batch_size=1), None)
            if first is None:
                return None
            pq.write_table(pa.Table.from_batches([first]), one)
            return one
        with src.open("rb") as f:
            line = next((ln for ln in f if ln.strip()), None)
        if line is None:
            return None
        one.write_bytes(line)
        return one
    except Exception:  # the whole file's read says why, in one line
        return None


def _best_read(path: Path, items: ItemSpec) -> dict[str, float] | None:
    """The least wall and CPU time of 3 reads of ``path``, after one that pays the imports; None if it fails."""
    from rightsize.errors import RightsizeError

    try:
        read_table(path, items)
        times = []
        for _ in range(3):
            t0 = _clock()
            read_table(path, items)
            times.append(_since(t0))
    except RightsizeError:
        return None
    return {k: min(t[k] for t in times) for k in times[0]}


# -- local multiprocessing ---------------------------------------------------------------------------

_PREDICTOR: Predictor | None = None
_LOAD_FAILED: Exception | None = None  # why this worker could not build the model (``_init_worker``)


def load_predictor(infer: dict[str, Any]) -> tuple[Predictor | None, Exception | None]:
    """(the worker's Predictor, None), or (None, why it could not be built). A local pool worker and a Ray actor
    keep the failure for their first batch to raise, where it reaches the driver as it is: a Pool whose initializer
    raises starts a new worker for ever (a factory that raised had printed its traceback in a loop, and the pipeline
    never ended), and a Ray actor whose constructor raises reaches the driver as a traceback (ActorDiedError, exit 1).
    A factory that never returns stops after its time limit, as in the driver."""
    from rightsize.errors import RightsizeError, RunFailedError
    from rightsize.models.time_limit import limit_in_this_child

    limit_in_this_child()
    try:
        return Predictor(infer), None
    except RightsizeError as exc:  # the driver gets it as it is (they pickle)
        return None, exc
    except Exception as exc:  # its own failure (out of memory, a bad weights file): one line, not a respawn loop
        return None, RunFailedError(f"a pipeline worker could not build the model: {type(exc).__name__}: "
                                    f"{str(exc).strip()[:300]}")  # fmt: skip


def _init_worker(infer: dict[str, Any]) -> None:
    """Build the worker's model (``load_predictor``)."""
    global _PREDICTOR, _LOAD_FAILED
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's: it ends the pool ("Process ...Worker-1:")
    _PREDICTOR, _LOAD_FAILED = load_predictor(infer)


def _run_chunk(args: tuple[dict[str, Any], Any]) -> Batch:
    spec, chunk = args
    if _LOAD_FAILED is not None:
        raise _LOAD_FAILED
    assert _PREDICTOR is not None
    batch = read_stage({"id": np.arange(*chunk, dtype=np.int64)}, spec) if isinstance(chunk, tuple) else chunk
    return predict(_PREDICTOR, preprocess_stage(batch, spec))


def predict(predictor: Predictor, batch: Batch) -> Batch:
    """``predictor(batch)``; the model's own failure one line (a local worker's had reached the driver as a
    72-line RemoteTraceback, exit 1), naming the batch it failed on."""
    from rightsize.errors import RightsizeError, RunFailedError, first_line

    try:
        return predictor(batch)
    except RightsizeError:
        raise
    except Exception as exc:
        first = first_line(exc)
        n = len(batch["id"]) if "id" in batch else "?"
        raise RunFailedError(f"the model failed on a batch of {n} items in a pipeline worker ({type(exc).__name__}: "
                             f"{first}); fix its forward (one output row per item), or pass --batch-size 1 if it "
                             "takes one item at a time") from None  # fmt: skip


def run_local(plan: PipelinePlan, sink: Sink) -> EngineRun:
    """Process every item with ``plan.workers`` local processes (forkserver children)."""
    run = EngineRun("local", max(1, plan.workers), 0.0)
    step = block_items(plan.items, plan.infer.batch_size, plan.n_items, run.workers)
    spec = plan.items.to_dict()
    chunks: Iterator[tuple[dict[str, Any], Any]]
    t0 = time.perf_counter()
    if plan.input_path:
        table = read_input(plan, run)
        run.expected_ids = table.column("id").to_numpy()
        step = block_items(plan.items, plan.infer.batch_size, table.num_rows, run.workers)
        chunks = ((spec, table_batch(table.slice(i, step), plan.items)) for i in range(0, table.num_rows, step))
    else:
        chunks = ((spec, (i, min(i + step, plan.n_items))) for i in range(0, plan.n_items, step))
    # Workers fork from a server that imported torch once (no effect if this process's server already runs).
    ctx = forkserver_context(["torch", "rightsize.cluster.stages"])
    with ctx.Pool(run.workers, initializer=_init_worker, initargs=(plan.infer.to_dict(),)) as pool:
        for out in pool.imap_unordered(_run_chunk, chunks):
            sink(out)
    run.wall_s = time.perf_counter() - t0
    return run


# -- Ray Data ------------------------------------------------------------------------------------------


def actor_resources(infer: InferSpec) -> dict[str, float]:
    """What one inference actor reserves: a GPU, or ``threads`` CPUs (default 1)."""
    if infer.device == "cuda":
        return {"num_cpus": 1.0, "num_gpus": 1.0}
    return {"num_cpus": float(infer.threads or 1), "num_gpus": 0.0}


def default_ray_workers(infer: InferSpec, cpus: float, gpus: float) -> int:
    """One actor per GPU; on CPU, enough actors to fill the cluster's CPUs but one (for read/preprocess)."""
    if infer.device == "cuda":
        return max(1, int(gpus))
    per = actor_resources(infer)["num_cpus"]
    return max(1, int((cpus - 1) // per)) if cpus > per else 1


class RayPredictor:
    """``Predictor`` as a Ray Data actor: a model that cannot be built fails the actor's first batch, not its
    constructor (``load_predictor``)."""

    def __init__(self, infer: dict[str, Any]) -> None:
        self._predictor, self._failed = load_predictor(infer)

    def __call__(self, batch: Batch) -> Batch:
        if self._failed is not None:
            raise self._failed
        assert self._predictor is not None
        return predict(self._predictor, batch)


def _ours(exc: BaseException) -> Exception | None:
    """The RightsizeError an actor raised, from the error Ray Data hands the driver (a RayTaskError whose ``cause`` it
    is; the driver's context sets ``raise_original_map_exception``, so Ray Data does not wrap it in its own
    UserCodeException); None when there is none (Ray's own failure: raised as it is)."""
    from rightsize.errors import RightsizeError

    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, RightsizeError) else None


def run_ray(plan: PipelinePlan, sink: Sink, address: str) -> EngineRun:
    """Process every item on the Ray cluster at ``address`` with Ray Data and an actor pool."""
    from rightsize.cluster.nodes import nodes_from_ray
    from rightsize.cluster.session import import_ray, ray_session
    from rightsize.errors import UnsupportedError

    with ray_session(address) as session:
        ray = import_ray()
        import pyarrow as pa

        alive = [n for n in nodes_from_ray(ray.nodes()) if n.alive]
        cpus, gpus = sum(n.cpus for n in alive), sum(n.gpus for n in alive)
        if plan.infer.device == "cuda" and gpus < 1:
            raise UnsupportedError("--device cuda: the Ray cluster has no GPU; use --device cpu")
        workers = plan.workers or default_ray_workers(plan.infer, cpus, gpus)
        res = actor_resources(plan.infer)
        run = EngineRun("ray", workers, 0.0)
        run.cluster = {"nodes": len(alive), "cpus": cpus, "gpus": gpus, "actor": res}
        run.notes += [session.note] if session.note else []
        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = False
        context.raise_original_map_exception = True  # an actor's RightsizeError reaches the driver (``_ours``)
        # ray.data sets its own INFO level on import, and logs a failed task's traceback itself: the driver raises it
        logging.getLogger("ray.data").setLevel(logging.CRITICAL)
        spec = plan.items.to_dict()
        t0 = time.perf_counter()
        if plan.input_path:
            table = read_input(plan, run)
            run.expected_ids = table.column("id").to_numpy()
            step = block_items(plan.items, plan.infer.batch_size, table.num_rows, workers)
            ds = ray.data.from_arrow([table.slice(i, step) for i in range(0, table.num_rows, step)])
        else:
            n_blocks = max(
                1, math.ceil(plan.n_items / block_items(plan.items, plan.infer.batch_size, plan.n_items, workers))
            )
            blocks = [pa.table({"id": c}) for c in np.array_split(np.arange(plan.n_items, dtype=np.int64), n_blocks)]
            ds = ray.data.from_arrow(blocks).map_batches(
                read_stage, fn_kwargs={"spec": spec}, batch_size=None, batch_format="numpy"
            )
        ds = ds.map_batches(preprocess_stage, fn_kwargs={"spec": spec}, batch_size=None, batch_format="numpy")
        transport = max(plan.infer.batch_size, 1024 // plan.infer.batch_size * plan.infer.batch_size)
        ds = ds.map_batches(
            RayPredictor, fn_constructor_kwargs={"infer": plan.infer.to_dict()}, batch_size=transport,
            batch_format="numpy", compute=ray.data.ActorPoolStrategy(size=workers), **res,
        )  # fmt: skip
        try:
            for out in ds.iter_batches(batch_size=None, batch_format="numpy"):
                sink(out)
        except Exception as exc:  # a RightsizeError an actor raised comes wrapped in Ray's RayTaskError
            ours = _ours(exc)
            if ours is None:  # Ray's own failure: as it is, its chain kept
                raise
            raise ours from None
        run.wall_s = time.perf_counter() - t0
        return run
