"""One server's moving parts on the event loop: the pools (Batchers), the router and the metrics.

Lifecycle: ``Service(config)`` checks the config and the model's input contract (no model built yet, so
bad input fails before a port is bound); ``await start()`` builds the model, warms each worker, starts
the workers; ``submit()`` routes and admits a request; ``begin_drain()`` stops admitting and flushes
partial batches; ``await stop()`` waits for the queues to drain and answers anything left.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, cast

from rightsize.allocator import keep_freed_memory
from rightsize.errors import SpecError, first_line, input_refused
from rightsize.serve.batcher import Batch, Batcher, Pending, QueueFull, ShuttingDown, WarmupFailed
from rightsize.serve.config import (
    PoolConfig,
    ServerConfig,
    cpu_cores,
    cuda_available,
    resolve_pools,
    resolve_router,
)
from rightsize.serve.metrics import ServeMetrics
from rightsize.serve.router import Route, choose_pool
from rightsize.serve.workers import (
    LoadedModel,
    WorkerProcess,
    close_runs,
    example_batch,
    in_processes,
    input_spec,
    load_model,
    make_runs,
)
from rightsize.wire import ParsedRequest

log = logging.getLogger("rightsize.serve")


# A queue a few tens of milliseconds deep is jitter, not overload: with a 3 ms batch, two batch times (6 ms) refused
# 3.4% of a light 100 req/s load on a busy 2-core machine (an event-loop hiccup is longer than that).
ADMISSION_FLOOR_MS = 50.0


async def _load(loop: asyncio.AbstractEventLoop, config: ServerConfig) -> LoadedModel:
    """``load_model(config)`` on a daemon thread of its own. A user's factory model must load within twice
    ``RIGHTSIZE_FACTORY_TIMEOUT_S`` (its build, then its preparation at the served precision): off the main thread no
    timer can interrupt the factory, and a factory that never returned hung `serve` for ever, deaf to SIGTERM. The
    thread is left behind when the limit passes; being a daemon, it does not hold the process at exit."""
    from rightsize.models.byo import is_factory_ref
    from rightsize.models.time_limit import FACTORY_TIMEOUT_ENV, factory_timeout_s

    limit = 2 * factory_timeout_s() if is_factory_ref(config.model) else None
    done: asyncio.Future[LoadedModel] = loop.create_future()

    def settle(value: LoadedModel | None, exc: BaseException | None) -> None:
        if done.done():  # the limit passed first
            return
        if exc is not None:
            done.set_exception(exc)
        else:
            done.set_result(cast(LoadedModel, value))

    def run() -> None:
        try:
            value = load_model(config)
        except BaseException as exc:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                loop.call_soon_threadsafe(settle, None, exc)
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, value, None)

    threading.Thread(target=run, name="rightsize-load-model", daemon=True).start()
    try:
        return await asyncio.wait_for(done, limit)
    except asyncio.TimeoutError:
        raise SpecError("model", f"{config.model} has not loaded after {limit:g} s; a factory must build and return "
                        "the torch.nn.Module (check it for a loop or a blocking call), or allow more with "
                        f"{FACTORY_TIMEOUT_ENV}=SECONDS") from None  # fmt: skip


def admission_limit_ms(max_queue_batches: float, t_full_ms: float, max_wait_ms: float) -> float:
    """The expected completion past which the default admission refuses a request (503): ``max_queue_batches`` full
    batches and the batching wait, never under ``ADMISSION_FLOOR_MS``."""
    return max(ADMISSION_FLOOR_MS, max_queue_batches * t_full_ms + max_wait_ms)


class Service:
    """Pools + router + metrics of one server; every method runs on the event loop thread."""

    def __init__(self, config: ServerConfig, on_ready: Callable[[Service], None] | None = None) -> None:
        self.config = config
        self.on_ready = on_ready
        self.cores = cpu_cores()
        needs_cuda_check = config.pools is None or any(p.is_gpu for p in config.pools)
        self.has_cuda = cuda_available() if needs_cuda_check else False
        self.router = resolve_router(config, self.has_cuda)
        self.pool_configs: tuple[PoolConfig, ...] = resolve_pools(config, self.has_cuda, self.cores)
        self.spec, _lm = input_spec(config)
        self.metrics = ServeMetrics([p.name for p in self.pool_configs], self.cores)
        self.metrics.worker_pids = self._worker_pids  # their CPU is the server's too (rightsize_cpu_utilization)
        self.batchers: list[Batcher] = []
        self.ready = False
        self.draining = False
        self.start_error: BaseException | None = None
        self.base_url: str | None = None  # set by the server once its socket is bound

    async def start(self) -> None:
        """Build the model, make each pool's workers, warm them up, start them; then ready."""
        loop = asyncio.get_running_loop()
        cfg = self.config
        keep_freed_memory()  # the allocator the profile was timed under (rightsize.allocator)
        try:
            models = {}  # one model per precision the pools run (lanes may differ: --lane NAME=WxT:int8)
            for pool in self.pool_configs:
                precision = pool.precision or cfg.precision
                at = replace(cfg, precision=precision)
                if precision not in models:
                    models[precision] = await _load(loop, at)
                runs, init = await loop.run_in_executor(None, make_runs, pool, models[precision], precision, at)
                self.batchers.append(
                    Batcher(
                        pool.name,
                        runs,
                        cfg.max_batch,
                        cfg.max_wait_ms,
                        cfg.queue_size,
                        init,
                        self._on_batch,
                        # a batch for a worker process cannot run on the loop thread: it waits on the pipe
                        inline_below_ms=0.0 if pool.is_gpu or in_processes(runs) else cfg.inline_below_ms,
                    )
                )
            if cfg.warmup:
                try:
                    for b in self.batchers:
                        await b.warmup(lambda n: example_batch(self.spec, n))
                except WarmupFailed as failed:
                    raise _warmup_refused(cfg, failed) from None
        except BaseException as exc:
            self.start_error = exc
            raise
        by_name = {b.name: b for b in self.batchers}
        self.metrics.queue_length = lambda p: by_name[p].queue.queued_samples
        self.metrics.busy_s = lambda p: by_name[p].busy_s
        self.metrics.workers = lambda p: by_name[p].workers
        self.metrics.gpu_utilization = self._gpu_utilization
        for b in self.batchers:
            b.start()
        self.ready = True
        log.info("ready: pools %s, router %s", [(p.name, p.device, p.workers) for p in self.pool_configs], self.router)
        if self.on_ready is not None:
            self.on_ready(self)

    def _on_batch(self, pool: str, batch: Batch, compute_s: float, queue_s: Any) -> None:
        size = sum(item.n for item in batch.items)
        busy_s = time.perf_counter() - batch.taken_perf_s  # taken off the queue -> answered
        self.metrics.on_batch(pool, size, batch.reason, batch.wait_s, compute_s, queue_s, busy_s, batch.taken_perf_s)

    def route(self, n: int) -> Route:
        """The pool for an n-sample request (pure routing over the pools' current states)."""
        cfg = self.config
        if len(self.batchers) == 1 and cfg.slo_ms is None:
            return Route(0, "fixed", 0.0, False)  # the fast path: nothing to weigh
        now_s = asyncio.get_running_loop().time()
        states = [b.state(now_s) for b in self.batchers]
        return choose_pool(n, states, self.router, cfg.slo_ms, cfg.crossover_batch)

    def submit(self, request: ParsedRequest) -> tuple[Batcher, Pending]:
        """Route and admit; raises QueueFull (503 + Retry-After) or ShuttingDown (503)."""
        if self.draining or not self.ready:
            raise ShuttingDown("the server is not accepting requests (starting or shutting down)")
        n = int(request.inputs.shape[0])
        route = self.route(n)
        batcher = self.batchers[route.pool]
        if route.misses_slo:
            raise QueueFull(
                f"pool {batcher.name!r} would answer in ~{route.ect_ms:.0f} ms, past the {self.config.slo_ms:g} ms SLO",
                max(1, int(route.ect_ms / 1000 + 0.999)),
            )
        if self.config.slo_ms is None and self.config.max_queue_batches > 0:
            self._admit_by_wait(batcher, n)
        deadline_ms = request.deadline_ms if request.deadline_ms is not None else self.config.default_deadline_ms
        pending = batcher.submit(request.inputs, request.priority, deadline_ms)
        self.metrics.on_route(batcher.name, route.reason)
        return batcher, pending

    def _admit_by_wait(self, batcher: Batcher, n: int) -> None:
        """Without an SLO, refuse (503) a request that would wait more than ``max_queue_batches`` full
        batches: under overload the queue holds seconds of work, not a fixed count of samples."""
        t_full = batcher.fit.predict_ms(batcher.max_batch)
        if t_full <= 0:  # nothing measured yet (warm-up off): the sample cap alone applies
            return
        limit_ms = admission_limit_ms(self.config.max_queue_batches, t_full, batcher.max_wait_ms)
        ect_ms = batcher.state(asyncio.get_running_loop().time()).expected_completion_ms(n)
        if ect_ms > limit_ms:
            raise QueueFull(
                f"pool {batcher.name!r} would answer in ~{ect_ms:.0f} ms, more than "
                f"{limit_ms:.0f} ms ({self.config.max_queue_batches:g} batch times, at least {ADMISSION_FLOOR_MS:g} "
                "ms); retry later or set --slo-ms",
                max(1, int(ect_ms / 1000 + 0.999)),
            )

    def begin_drain(self) -> None:
        """Stop admitting (503) and dispatch partial batches at once."""
        self.draining = True
        self.ready = False
        for b in self.batchers:
            b.drain()

    async def stop(self) -> None:
        """Drain every pool for up to ``drain_timeout_s``; whatever is left is answered 503."""
        self.begin_drain()
        await asyncio.gather(*(b.join(self.config.drain_timeout_s) for b in self.batchers))
        for b in self.batchers:  # after the drain: a worker process answers what it holds first
            close_runs(b.runs)

    def _worker_pids(self) -> list[int]:
        """The pids of the pools' worker processes (a CPU pool of k > 1 workers; none when the model runs here)."""
        return [r.process.pid for b in self.batchers for r in b.runs if isinstance(r, WorkerProcess) and r.process.pid]

    def _gpu_utilization(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for pool in self.pool_configs:
            if pool.is_gpu and pool.predict is None:
                try:
                    import torch

                    out[pool.device] = torch.cuda.utilization(torch.device(pool.device)) / 100.0
                except Exception:  # no NVML: the pool's busy fraction stands in (rightsize_pool_utilization)
                    continue
        return out

    def info(self) -> dict[str, Any]:
        """What a client needs to build valid requests (GET /v1/info)."""
        cfg = self.config
        return {
            "model": cfg.model,
            "tiny": cfg.tiny,
            "precision": cfg.precision,
            "sample_shape": list(self.spec.sample_shape),
            "dtype": self.spec.dtype,
            "max_value": self.spec.max_value,
            "max_batch": cfg.max_batch,
            "max_wait_ms": cfg.max_wait_ms,
            "queue_size": cfg.queue_size,
            "slo_ms": cfg.slo_ms,
            "max_queue_batches": cfg.max_queue_batches,
            "router": self.router,
            "cores": self.cores,
            "pools": [
                {
                    "name": p.name,
                    "device": p.device,
                    "workers": p.workers,
                    "threads": p.threads,
                    "precision": p.precision or self.config.precision,
                }
                for p in self.pool_configs
            ],
            "ready": self.ready,
            "url": self.base_url,
        }


def _warmup_refused(cfg: ServerConfig, failed: WarmupFailed) -> BaseException:
    """One line for a model that fails its warm-up (it had been uvicorn's traceback, exit 1): past batch 1, the batch
    size is what it cannot run (--max-batch); at batch 1 the input the user asked for (--seq, --image: as `memory`
    says it), or the model itself."""
    exc, n = failed.cause, failed.batch
    first = first_line(exc)
    if n > 1:
        return SpecError("--max-batch", f"{cfg.model} failed its warm-up batch of {n} samples ({type(exc).__name__}: "
                         f"{first}) and ran batch 1: pass the largest batch it runs, e.g. --max-batch 1")  # fmt: skip
    if cfg.seq_len is not None or cfg.image_size is not None:
        return input_refused(cfg.model, cfg.seq_len, cfg.image_size, exc)
    return SpecError("model", f"{cfg.model} failed its warm-up batch of 1 ({type(exc).__name__}: {first}); check "
                     "its forward and the input it is given (--shape, --vocab)")  # fmt: skip
