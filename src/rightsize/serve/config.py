"""What a server runs: the model, its pools of workers, batching and admission settings.

    ServerConfig   one server: model + batching + router + HTTP settings (the Python API of `rightsize serve`)
    PoolConfig     one device pool: a FIFO queue shared by ``workers`` workers on one device

A pool's ``predict`` (``batch_tensor -> tensor``, first dimension = samples) overrides the zoo model:
tests and benchmarks use it to serve fake, slow or trivial models through the same batcher and router.
No torch import here; ``resolve_pools`` decides pools from the config and the machine.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

from rightsize.errors import SpecError, UnsupportedError
from rightsize.inputfile import check_finite

Router = Literal["cpu", "gpu", "size", "hybrid"]
Precision = Literal["fp32", "bf16", "int8"]
InputDtype = Literal["float32", "int64"]

ROUTERS: tuple[str, ...] = ("cpu", "gpu", "size", "hybrid")
PRECISIONS: tuple[str, ...] = ("fp32", "bf16", "int8")

# predict(batch) -> outputs; batch: [n, *sample_shape] tensor, outputs: [n, ...] tensor.
PredictFn = Callable[[Any], Any]


@dataclass(frozen=True)
class PoolConfig:
    """One device pool. GPU pools default to 2 workers: up to 2 batches in flight, each on its own stream."""

    name: str  # label in metrics and routing: "cpu", "gpu", or any name (tests use "fast"/"slow")
    device: str = "cpu"  # "cpu" | "cuda" | "cuda:N"
    workers: int = 1
    threads: int | None = None  # intra-op threads per CPU worker (torch.set_num_threads)
    predict: PredictFn | None = None  # overrides the model for this pool
    precision: Precision | None = None  # this pool's model precision (None: the server's --precision)

    @property
    def is_gpu(self) -> bool:
        return self.device.startswith("cuda")


# A request's headers and body must arrive within this: both servers' (``ServerConfig``, ``rightsize.llm.server``)
# default, and ``rightsize serve --read-timeout-s``'s.
READ_TIMEOUT_S = 10.0
MAX_READ_TIMEOUT_S = 86_400.0  # a day: past it, a stuck reader holds its connection for good


def check_read_timeout(value: float) -> None:
    """Both servers' one check of ``--read-timeout-s``: finite, 1 ms to a day (NaN passes every comparison)."""
    check_finite("--read-timeout-s", value, 0.001, MAX_READ_TIMEOUT_S, low_open=False)


@dataclass(frozen=True)
class ServerConfig:
    """Everything ``rightsize serve`` takes; ``running_server(config)`` serves it in-process.

    Admission (503 + Retry-After at once, never a long wait): with ``slo_ms`` set, a request whose
    expected completion exceeds the SLO; without it, one whose expected completion exceeds
    ``max_queue_batches`` full batches of its pool (from the measured t(n), so the bound follows the
    model's speed: ~2 batch times by default, 0 turns it off); and in any case more than ``queue_size``
    samples waiting per pool.
    """

    model: str = "simplenet"
    tiny: bool = False
    seq_len: int | None = None
    image_size: int | None = None
    precision: Precision = "fp32"
    max_batch: int = 8  # samples per batch; also the most samples one request may carry
    max_wait_ms: float = 2.0  # a partial batch waits until the oldest request's enqueue time + this
    workers: int | None = None  # CPU worker processes (None: 1, on every core)
    threads: int | None = None  # intra-op threads per CPU worker (None: cores // workers)
    router: Router | None = None  # None: "hybrid" with CUDA, "cpu" without
    queue_size: int = 256  # samples waiting per pool before 503
    slo_ms: float | None = None  # latency target: hybrid spill and early 503 when it would be missed
    max_queue_batches: float = 2.0  # without slo_ms: 503 when expected completion > this many full batches
    crossover_batch: int | None = None  # size router: requests below this many samples go to CPU
    host: str = "127.0.0.1"
    port: int = 8000  # 0: a free port
    token: str | None = None  # bearer token; None: no auth
    max_body_bytes: int = 64 * 2**20
    read_timeout_s: float = READ_TIMEOUT_S  # a request's headers and body must arrive within this (slow clients)
    max_connections: int = 2048  # past this, a new connection evicts the slowest unfinished reader
    default_deadline_ms: float | None = None  # deadline applied when a request gives none
    drain_timeout_s: float = 30.0  # graceful shutdown: how long queued requests may still run
    warmup: bool = True  # run each worker once (batch 1 and max_batch) before /readyz turns ready
    inline_below_ms: float = 0.2  # CPU batches expected faster than this run on the event loop (no thread hop)
    log_level: str = "warning"
    # Custom model (overrides the zoo): predict plus what one sample looks like.
    predict: PredictFn | None = None
    sample_shape: tuple[int, ...] | None = None
    input_dtype: InputDtype | None = None
    input_max: int | None = None  # int64 inputs must be < this (token vocabulary)
    pools: tuple[PoolConfig, ...] | None = None  # explicit pools (overrides workers/threads/router pools)

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise SpecError("--precision", f"must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        if self.router is not None and self.router not in ROUTERS:
            raise SpecError("--router", f"must be one of {', '.join(ROUTERS)}, got {self.router!r}")
        checks: list[tuple[str, float | None, float]] = [
            ("--max-batch", self.max_batch, 1),
            ("--queue-size", self.queue_size, 1),
            ("--workers", self.workers, 1),
            ("--threads", self.threads, 1),
            ("--max-body-bytes", self.max_body_bytes, 64),
            ("--max-connections", self.max_connections, 1),
        ]
        for name, value, low in checks:
            if value is not None and value < low:
                raise SpecError(name, f"must be >= {low:g}, got {value}")
        check_read_timeout(self.read_timeout_s)
        # Finite too: NaN passes every comparison, so `< 0` alone would let it through.
        check_finite("--max-wait-ms", self.max_wait_ms, 0.0, 60_000.0, low_open=False)
        check_finite("--slo-ms", self.slo_ms, 0.0, 3_600_000.0)
        check_finite("--max-queue-batches", self.max_queue_batches, 0.0, 10_000.0, low_open=False)
        if not 0 <= self.port <= 65535:
            raise SpecError("--port", f"must be in 0..65535, got {self.port}")
        if self.queue_size < self.max_batch:
            raise SpecError("--queue-size", f"must be >= --max-batch ({self.max_batch}), got {self.queue_size}")
        if self.pools is not None:
            names = [p.name for p in self.pools]
            if not names or len(set(names)) != len(names):
                raise SpecError("pools", f"need one or more pools with distinct names, got {names}")


_LANE = re.compile(r"^([A-Za-z][\w-]{0,31})=(\d{1,4})x(\d{1,4})(?::(\w+))?$")


def parse_lanes(lanes: list[str], cores: int) -> tuple[PoolConfig, ...]:
    """``--lane NAME=WORKERSxTHREADS[:PRECISION]`` (repeated) -> CPU pools, the first for the smallest requests.

    Two CPU lanes let the size router (or the hybrid one) run where there is no GPU: e.g. one worker of
    one thread for single samples and another for large requests, so large ones never delay the small.
    A lane's precision (fp32, bf16, int8) makes lanes of different speed on the same cores."""
    pools: list[PoolConfig] = []
    for text in lanes:
        m = _LANE.match(text.strip())
        if m is None or int(m.group(2)) < 1 or int(m.group(3)) < 1:
            raise SpecError(
                "--lane", f"expected NAME=WORKERSxTHREADS[:PRECISION] with both >= 1, e.g. small=1x1; got {text!r}"
            )
        precision = m.group(4)
        if precision is not None and precision not in PRECISIONS:
            raise SpecError(
                "--lane", f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r} in {text!r}"
            )
        pools.append(PoolConfig(m.group(1), "cpu", int(m.group(2)), int(m.group(3)), precision=precision))  # type: ignore[arg-type]
    names = [p.name for p in pools]
    if len(set(names)) != len(names):
        raise SpecError("--lane", f"lane names must differ, got {', '.join(names)}")
    used = sum(p.workers * (p.threads or 1) for p in pools)
    if used > cores:
        raise SpecError("--lane", f"the lanes use {used} threads and this machine has {cores} cores; give fewer "
                        "workers or threads per lane")  # fmt: skip
    return tuple(pools)


def cpu_cores() -> int:
    """Cores this process may use (the affinity mask, not the machine's count)."""
    from rightsize.cpus import usable_cores

    return usable_cores()


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:  # pragma: no cover
        return False
    return bool(torch.cuda.is_available())


def resolve_router(config: ServerConfig, has_cuda: bool) -> Router:
    if config.router is not None:
        return config.router
    if config.pools is not None and len(config.pools) > 1:
        return "hybrid"
    return "hybrid" if has_cuda else "cpu"


def split_threads(cores: int, workers: int | None, threads: int | None) -> tuple[int, int]:
    """(workers, threads per worker) with workers × threads ≤ cores; a SpecError names the fix otherwise."""
    w = workers if workers is not None else 1  # one process on every core: the usual CPU deployment
    if w > cores:
        raise SpecError("--workers", f"{w} worker processes exceed the {cores} cores here; use --workers {cores} or "
                        "fewer")  # fmt: skip
    t = threads if threads is not None else max(1, cores // w)
    if w * t > cores:
        fix = max(1, cores // w)
        raise SpecError("--threads", f"{w} workers × {t} threads exceeds the {cores} cores here; use --threads {fix}")
    return w, t


def resolve_pools(config: ServerConfig, has_cuda: bool, cores: int) -> tuple[PoolConfig, ...]:
    """The pools to start: explicit ones, else a CPU pool and/or a GPU pool as the router needs."""
    router = resolve_router(config, has_cuda)
    if config.pools is not None:
        pools = config.pools
        if router in ("size", "hybrid") and len(pools) < 2:
            raise SpecError("--router", f"{router!r} needs two pools (small-request pool first), got {len(pools)}")
        return tuple(replace(p, predict=p.predict or config.predict) for p in pools)
    if router != "cpu" and not has_cuda:
        lanes = " (or --router size with two CPU lanes: --lane small=1x1 --lane large=1x1)" if router == "size" else ""
        raise UnsupportedError(f"--router {router} needs CUDA, which this machine lacks; use --router cpu{lanes}")
    made: list[PoolConfig] = []
    if router != "gpu":
        w, t = split_threads(cores, config.workers, config.threads)
        made.append(PoolConfig("cpu", "cpu", w, t, config.predict))
    if router != "cpu":
        made.append(PoolConfig("gpu", "cuda", 2, None, config.predict))
    return tuple(made)
