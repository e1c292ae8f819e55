"""The model side of a pool: load the model once, then one ``run(batch) -> outputs`` per worker.

    run: np.ndarray [n, *sample_shape] -> np.ndarray [n, ...]   (called in the worker's own thread)

bf16 runs under autocast (fp32 weights, bf16 matmuls), as the measurement harness times it, so a
served batch costs what the profile says. A CPU pool of one worker runs the model in the server's
process at ``torch.set_num_threads(threads)``. A CPU pool of k > 1 workers runs k worker processes
(``WorkerProcess``), each building the model as the server did and loading the weights served here
(not every model is seeded), with its own ``threads``: the k x t layout the planner prices for a CPU
instance, with no GIL shared between workers (each worker's Python dispatch per operator is its own,
as the CPU time model charges it). The batcher's worker thread hands each batch to its process over
a pipe. A pool with a custom ``predict`` keeps in-process threads (a Python callable need not survive
a process).
GPU workers share one model on the device; each has its own CUDA stream, so a pool of 2 keeps up to
2 batches in flight (copy of one overlaps compute of the other). Decoder LMs answer the next token
id (argmax of the last position), not [S, vocab] logits.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from rightsize.errors import UnsupportedError
from rightsize.models.zoo import TINY_MAX_SEQ
from rightsize.serve.batcher import ModelError
from rightsize.serve.config import PoolConfig, PredictFn, ServerConfig
from rightsize.wire import InputSpec

RunBatch = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class LoadedModel:
    """What the server serves: the input contract and, for zoo models, the built module."""

    name: str
    spec: InputSpec
    module: Any | None  # torch.nn.Module; None when a custom predict is served
    lm: bool  # decoder LM: reduce [n, S, vocab] logits to the next token id [n, 1]


def input_spec(config: ServerConfig) -> tuple[InputSpec, bool]:
    """The per-sample input contract (and whether the model is a decoder LM), without building it."""
    if config.predict is not None or (config.pools and all(p.predict for p in config.pools)):
        if config.sample_shape is None:
            raise UnsupportedError("a custom predict needs ServerConfig.sample_shape (one sample's shape)")
        dtype = config.input_dtype or "float32"
        return InputSpec(tuple(config.sample_shape), dtype, config.input_max, config.max_batch), False

    entry = _entry(config)
    if entry.meta_only:
        raise UnsupportedError(f"model {config.model!r} is too big to build here (memory planning only)")
    shape = entry.sample_shape(config.seq_len, config.image_size, config.tiny)
    if config.tiny and config.seq_len and entry.kind == "tokens" and entry.family != "user":
        shape = (min(config.seq_len, TINY_MAX_SEQ),)  # tiny caps the default 128 at 16, not an explicit --seq
    if entry.kind == "tokens":
        return InputSpec(shape, "int64", entry.input_vocab(config.tiny), config.max_batch), entry.lm
    return InputSpec(shape, "float32", None, config.max_batch), entry.lm


def _entry(config: ServerConfig) -> Any:
    from rightsize.models import resolve_model

    vocab = config.input_max if config.input_dtype == "int64" else None
    return resolve_model(config.model, list(config.sample_shape) if config.sample_shape else None, vocab)


def load_model(config: ServerConfig) -> LoadedModel:
    """Build the zoo model (random weights, eval mode) at the configured precision, on the CPU."""
    spec, lm = input_spec(config)
    if config.predict is not None or (config.pools and all(p.predict for p in config.pools)):
        return LoadedModel(config.model, spec, None, False)
    from rightsize.measure.precision import prepare_inference

    entry = _entry(config)
    sample = entry.example_input(1, seq_len=config.seq_len, image_size=config.image_size, tiny=config.tiny)
    module = prepare_inference(entry.build(config.tiny), config.precision, sample)  # sample: static int8 calibrates
    return LoadedModel(config.model, spec, module, lm)


def _to_numpy(out: Any) -> np.ndarray:
    import torch

    if isinstance(out, torch.Tensor):
        out = out.detach()
        if out.is_floating_point():
            out = out.float()
        return out.cpu().numpy()
    return np.asarray(out)


def _predict_fn(pool: PoolConfig, model: LoadedModel, device: Any) -> PredictFn:
    """The pool's own predict, else the model (a copy moved to ``device``; Module.to works in place)."""
    if pool.predict is not None:
        return pool.predict
    if model.module is None:
        raise UnsupportedError(f"pool {pool.name!r} has no model: give it a predict or serve a zoo model")
    return model.module if device is None else copy.deepcopy(model.module).to(device)


def _cpu_run(predict: PredictFn | Any, bf16: bool, lm: bool) -> RunBatch:
    """One batch through ``predict`` on this process's CPU threads."""
    import torch

    def run(x: np.ndarray) -> np.ndarray:
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            out = predict(torch.from_numpy(x if x.flags.writeable else x.copy()))
            if lm:
                out = out[:, -1].argmax(-1, keepdim=True)
            return _to_numpy(out)

    return run


def cpu_runs(
    pool: PoolConfig, model: LoadedModel, precision: str, config: ServerConfig | None = None
) -> tuple[list[RunBatch], Callable[[], None]]:
    """One run per CPU worker and the thread initializer that sets its intra-op thread count. With more than one
    worker and the server's ``config`` (at ``precision``), each is a process of its own that builds the model as
    ``config`` says and loads the weights served here (module docstring)."""
    import io

    import torch

    threads = pool.threads

    def initializer() -> None:
        if threads is not None:
            torch.set_num_threads(threads)

    bf16 = precision == "bf16" and pool.predict is None
    lm = model.lm and pool.predict is None
    if pool.workers > 1 and pool.predict is None and model.module is not None and config is not None:
        try:
            buf = io.BytesIO()
            torch.save(model.module.state_dict(), buf)  # the very weights served here (not every model is seeded)
            weights: bytes | None = buf.getvalue()
        except Exception:  # a module without a plain state dict: in-process threads, as before
            weights = None
        if weights is not None:
            procs = [WorkerProcess(config, weights, threads or 1, i) for i in range(pool.workers)]
            try:
                for proc in procs:
                    proc.wait_ready()
            except BaseException:
                close_runs(list(procs))
                raise
            return list(procs), lambda: None
    return [_cpu_run(_predict_fn(pool, model, None), bf16, lm)] * pool.workers, initializer


WORKER_START_S = 600.0  # a worker process must load its model within this (a large model on a busy 2-core VM)


class WorkerProcess:
    """One CPU worker of a pool as a process of its own: it builds the server's model at its precision, sets its
    thread count, then runs each batch the parent sends over a pipe and sends the outputs back (or the error). It
    ignores Ctrl-C: the server drains first, then ``close`` stops it."""

    def __init__(self, config: ServerConfig, weights: bytes, threads: int, index: int) -> None:
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")  # fork after torch's thread pools start can deadlock
        self._conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_worker_main, args=(child, config, weights, threads), daemon=True,
                                   name=f"rightsize-worker-{index}")  # fmt: skip
        self.process.start()
        child.close()

    def wait_ready(self) -> None:
        if not self._conn.poll(WORKER_START_S):
            self.close()
            raise UnsupportedError(f"a worker process did not load the model within {WORKER_START_S:g} s")
        status, detail = self._recv()
        if status != "ready":
            self.close()
            raise detail if isinstance(detail, BaseException) else UnsupportedError(str(detail))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        try:
            self._conn.send(x)
        except (OSError, ValueError):  # closed, or the process is gone
            raise ModelError(f"worker process {self.process.name} exited (code {self.process.exitcode})") from None
        status, out = self._recv()
        if status == "err":
            raise out
        return np.asarray(out)

    def _recv(self) -> tuple[str, Any]:
        try:
            msg: tuple[str, Any] = self._conn.recv()
        except (EOFError, OSError):
            code = self.process.exitcode
            raise ModelError(f"worker process {self.process.name} exited (code {code}) while running a batch") from None
        return msg

    def close(self) -> None:
        """Stop the process: ask, then wait a little, then terminate."""
        with contextlib.suppress(OSError, ValueError):  # already gone
            self._conn.send(None)
        self.process.join(5.0)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(5.0)
        self._conn.close()


def _worker_main(conn: Any, config: ServerConfig, weights: bytes, threads: int) -> None:
    """A worker process: load, say ready, then answer batches until told to stop (None) or the pipe closes."""
    import io
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server drains on Ctrl-C, then closes its workers
    try:
        import torch

        torch.set_num_threads(threads)
        model = load_model(config)
        assert model.module is not None
        model.module.load_state_dict(torch.load(io.BytesIO(weights), weights_only=False))
        run = _cpu_run(model.module, config.precision == "bf16", model.lm)
        run(example_batch(model.spec, 1))  # first-call costs here, not in a served batch
    except BaseException as exc:  # a model that cannot load: the parent says why
        conn.send(("error", _picklable(exc)))
        return
    conn.send(("ready", None))
    while True:
        try:
            x = conn.recv()
        except (EOFError, OSError):
            return
        if x is None:
            return
        try:
            conn.send(("ok", run(x)))
        except Exception as exc:  # the batch's own error, raised again in the server as its type
            conn.send(("err", _picklable(exc)))


def _picklable(exc: BaseException) -> BaseException:
    import pickle

    try:
        pickle.dumps(exc)
        return exc
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")


def gpu_runs(pool: PoolConfig, model: LoadedModel, precision: str) -> tuple[list[RunBatch], Callable[[], None]]:
    """One run per GPU worker, each on its own CUDA stream; the model is moved to the device once."""
    import torch

    if not torch.cuda.is_available():
        raise UnsupportedError(f"pool {pool.name!r} wants {pool.device}, but CUDA is not available here")
    if precision == "int8" and pool.predict is None:
        raise UnsupportedError("--precision int8 is CPU-only here (PyTorch's quantized kernels); use bf16 on the GPU")
    device = torch.device(pool.device)
    predict = _predict_fn(pool, model, device)
    bf16 = precision == "bf16" and pool.predict is None
    lm = model.lm and pool.predict is None

    def make(stream: Any) -> RunBatch:
        def run(x: np.ndarray) -> np.ndarray:
            autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16)
            with torch.inference_mode(), torch.cuda.stream(stream), autocast:
                out = predict(torch.from_numpy(x if x.flags.writeable else x.copy()).to(device, non_blocking=True))
                if lm:
                    out = out[:, -1].argmax(-1, keepdim=True)
                host = _to_numpy(out)  # the copy to host waits for this stream's kernels only
                stream.synchronize()
                return host

        return run

    runs = [make(torch.cuda.Stream(device=device)) for _ in range(pool.workers)]

    def initializer() -> None:  # each worker thread talks to this pool's device ("cuda" alone: the current one)
        if device.index is not None:
            torch.cuda.set_device(device.index)

    return runs, initializer


def make_runs(
    pool: PoolConfig, model: LoadedModel, precision: str, config: ServerConfig | None = None
) -> tuple[list[RunBatch], Callable[[], None]]:
    return gpu_runs(pool, model, precision) if pool.is_gpu else cpu_runs(pool, model, precision, config)


def in_processes(runs: list[RunBatch]) -> bool:
    """Whether a pool's runs are worker processes (``WorkerProcess``) rather than calls in this process."""
    return any(isinstance(run, WorkerProcess) for run in runs)


def close_runs(runs: list[RunBatch]) -> None:
    """Stop a pool's worker processes (runs in the server's own process have nothing to stop)."""
    for run in runs:
        if isinstance(run, WorkerProcess):
            run.close()


def example_batch(spec: InputSpec, n: int) -> np.ndarray:
    """A valid [n, *sample_shape] batch for warm-up (zeros: valid features, pixels and token ids)."""
    return np.zeros((n, *spec.sample_shape), dtype=np.float32 if spec.dtype == "float32" else np.int64)
