"""Micro-batching for one device pool: a pure batch former, a bounded priority queue, and the workers.

Three layers, after Ray Serve's ``serve/batching.py``:

1. ``dispatch_reason`` and ``form_batch`` — pure functions: *when* a free worker dispatches (full / timeout
   / drain) and *which* requests it takes (highest priority first, FIFO within a priority, up to
   ``max_batch`` samples; expired requests set aside, cancelled ones dropped).
2. ``BatchQueue`` — the queue of one pool on the event loop; ``take()`` waits until a batch is due. A
   partial batch waits until the *oldest* queued request's enqueue time + ``max_wait_ms`` (Triton's rule;
   TorchServe starts the window at dequeue and hides queueing time — docs/sources.md `batching-designs`).
3. ``Batcher`` — ``submit()`` admits a request (503 when full), ``workers`` tasks take batches and run the
   model in their own thread (one thread hop per batch, none per request), then answer every request.

Every request owns a Future. Every path that ends a request sets its Future exactly once: result,
DeadlineExceeded, ModelError, ShuttingDown, or cancelled by the client. All queue state is touched only
on the event loop thread, so there is no lock and no race between admission, cancellation and dispatch;
the model thread only sees the arrays of a batch already taken off the queue.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from rightsize.serve.router import LinearFit, PoolState

Reason = Literal["full", "timeout", "drain"]
RunBatch = Callable[[np.ndarray], np.ndarray]  # [n, *sample] -> [n, ...], called in the worker's thread


class ServeError(Exception):
    """A request ended without a result; ``status`` is the HTTP answer."""

    status = 500


class QueueFull(ServeError):
    status = 503

    def __init__(self, detail: str, retry_after_s: int) -> None:
        super().__init__(detail)
        self.retry_after_s = retry_after_s


class ShuttingDown(ServeError):
    status = 503


class DeadlineExceeded(ServeError):
    status = 504


class ModelError(ServeError):
    status = 500


class WarmupFailed(Exception):
    """The model failed a warm-up batch of ``batch`` samples (``cause``): the server cannot start."""

    def __init__(self, batch: int, cause: BaseException) -> None:
        super().__init__(f"batch {batch}: {cause!r}")
        self.batch, self.cause = batch, cause


@dataclass(frozen=True)
class Result:
    outputs: np.ndarray  # [n, ...] this request's rows
    pool: str
    batch_size: int  # samples in the batch it ran in
    queue_ms: float  # enqueue -> dispatch
    compute_ms: float  # the batch's model time


@dataclass(eq=False)
class Pending:
    """One admitted request. ``state`` moves queued -> taken | dropped, once."""

    inputs: np.ndarray  # [n, *sample_shape]
    priority: int
    enqueued_s: float  # loop.time()
    deadline_s: float | None  # loop.time() by which it must have started, or None
    future: asyncio.Future[Result]
    seq: int = 0
    state: Literal["queued", "taken", "dropped"] = "queued"
    timer: asyncio.TimerHandle | None = None
    n: int = field(init=False)  # samples

    def __post_init__(self) -> None:
        self.n = int(self.inputs.shape[0])


@dataclass(frozen=True)
class Formed:
    batch: list[Pending]  # to run, in service order
    expired: list[Pending]  # past their deadline: answer 504
    dropped: list[Pending]  # cancelled or already answered: forget
    leftover: Pending | None  # first request that did not fit: goes back to the queue


# --- 1. pure functions ------------------------------------------------------------------------------


def dispatch_reason(
    queued_samples: int,
    oldest_enqueued_s: float | None,
    max_batch: int,
    max_wait_s: float,
    now_s: float,
    draining: bool,
) -> tuple[Reason | None, float | None]:
    """(reason to dispatch now, or None and the time to look again; None: wait for a new request)."""
    if queued_samples <= 0 or oldest_enqueued_s is None:
        return None, None
    if queued_samples >= max_batch:
        return "full", None
    if draining:
        return "drain", None
    due_s = oldest_enqueued_s + max_wait_s
    if now_s >= due_s:
        return "timeout", None
    return None, due_s


def form_batch(ordered: Iterator[Pending], max_batch: int, now_s: float) -> Formed:
    """Take requests in service order until ``max_batch`` samples; never splits a request."""
    batch: list[Pending] = []
    expired: list[Pending] = []
    dropped: list[Pending] = []
    size = 0
    for item in ordered:
        if item.state != "queued" or item.future.done():
            dropped.append(item)
        elif item.deadline_s is not None and item.deadline_s <= now_s:
            expired.append(item)
        elif size + item.n > max_batch:
            return Formed(batch, expired, dropped, item)
        else:
            batch.append(item)
            size += item.n
            if size >= max_batch:
                break
    return Formed(batch, expired, dropped, None)


# --- 2. the queue -----------------------------------------------------------------------------------


@dataclass
class Batch:
    items: list[Pending]
    reason: Reason
    dispatched_s: float
    wait_s: float  # how long a free worker held this partial batch open
    # time.perf_counter() when taken off the queue: the loop's clock is ms-granular under uvloop, too
    # coarse for the worker-busy time of a batch (GET /v1/batches)
    taken_perf_s: float = field(default_factory=time.perf_counter)


class BatchQueue:
    """Priority FIFO of one pool; all methods run on the event loop thread."""

    def __init__(self, max_batch: int, max_wait_ms: float, capacity_samples: int) -> None:
        self.max_batch = max_batch
        self.max_wait_s = max_wait_ms / 1000.0
        self.capacity_samples = capacity_samples
        self.queued_samples = 0  # live (state == "queued") samples
        self.draining = False
        self._heap: list[tuple[int, int, Pending]] = []  # (-priority, seq, item)
        self._arrivals: deque[Pending] = deque()  # arrival order, for the oldest live request
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._seq = itertools.count()

    def __len__(self) -> int:
        return self.queued_samples

    def put(self, item: Pending) -> None:
        item.seq = next(self._seq)
        heapq.heappush(self._heap, (-item.priority, item.seq, item))
        self._arrivals.append(item)
        self.queued_samples += item.n
        self._wake_one()

    def discard(self, item: Pending) -> bool:
        """Drop a queued request (cancelled or expired); it is skipped when popped. False if not queued."""
        if item.state != "queued":
            return False
        item.state = "dropped"
        self.queued_samples -= item.n
        return True

    def oldest_enqueued_s(self) -> float | None:
        while self._arrivals and self._arrivals[0].state != "queued":
            self._arrivals.popleft()
        return self._arrivals[0].enqueued_s if self._arrivals else None

    def _ordered(self) -> Iterator[Pending]:
        while self._heap:
            yield heapq.heappop(self._heap)[2]

    def _pop(self, now_s: float) -> Formed:
        formed = form_batch(self._ordered(), self.max_batch, now_s)
        if formed.leftover is not None:
            left = formed.leftover
            heapq.heappush(self._heap, (-left.priority, left.seq, left))
        for item in formed.batch:
            item.state = "taken"
            self.queued_samples -= item.n
        for item in formed.expired:
            self.discard(item)
        return formed

    async def take(self, on_expired: Callable[[list[Pending]], None]) -> Batch | None:
        """The next batch when one is due; None once draining and empty (the worker exits)."""
        loop = asyncio.get_running_loop()
        free_s = loop.time()
        while True:
            now_s = loop.time()
            oldest = self.oldest_enqueued_s()
            reason, wake_s = dispatch_reason(
                self.queued_samples, oldest, self.max_batch, self.max_wait_s, now_s, self.draining
            )
            if reason is not None:
                formed = self._pop(now_s)
                if formed.expired:
                    on_expired(formed.expired)
                if formed.batch:
                    if self.queued_samples > 0:
                        self._wake_one()  # the rest may be due for another free worker
                    assert oldest is not None
                    return Batch(formed.batch, reason, now_s, max(0.0, now_s - max(free_s, oldest)))
                continue  # everything taken was expired or dropped: look again
            if self.draining and self.queued_samples <= 0:
                return None
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append(waiter)
            timer = loop.call_at(wake_s, _wake, waiter) if wake_s is not None else None
            try:
                await waiter
            finally:
                if timer is not None:
                    timer.cancel()
                if not waiter.done():
                    waiter.cancel()

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def wake_all(self) -> None:
        while self._waiters:
            _wake(self._waiters.popleft())

    def drain(self) -> None:
        self.draining = True
        self.wake_all()

    def live(self) -> list[Pending]:
        return [item for _, _, item in self._heap if item.state == "queued"]


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


# --- 3. the public layer ----------------------------------------------------------------------------

OnBatch = Callable[[str, Batch, float, Sequence[float]], None]  # pool, batch, compute_s, queue_s per request


@dataclass
class _Slot:
    run: RunBatch
    executor: ThreadPoolExecutor
    busy_until_s: float | None = None  # loop.time() the running batch is expected to end


@dataclass
class Batcher:
    """One pool: its queue, its workers (one thread each) and its online t(n) fit."""

    name: str
    runs: list[RunBatch]  # one per worker
    max_batch: int
    max_wait_ms: float
    capacity_samples: int
    initializer: Callable[[], None] | None = None  # runs once in each worker thread (thread counts, streams)
    on_batch: OnBatch | None = None
    inline_below_ms: float = 0.0  # run batches expected faster than this on the loop thread (0: never)
    fit: LinearFit = field(default_factory=LinearFit)
    busy_s: float = 0.0  # total compute time, for utilisation
    queue: BatchQueue = field(init=False)
    _slots: list[_Slot] = field(init=False, default_factory=list)
    _tasks: list[asyncio.Task[None]] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        self.queue = BatchQueue(self.max_batch, self.max_wait_ms, self.capacity_samples)
        self._slots = [
            _Slot(run, ThreadPoolExecutor(1, f"rightsize-{self.name}-{i}", initializer=self.initializer))
            for i, run in enumerate(self.runs)
        ]

    @property
    def workers(self) -> int:
        return len(self._slots)

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._worker(slot)) for slot in self._slots]

    def state(self, now_s: float) -> PoolState:
        busy = tuple(max(0.0, s.busy_until_s - now_s) * 1000 for s in self._slots if s.busy_until_s is not None)
        return PoolState(
            self.name, self.queue.queued_samples, busy, self.workers, self.max_batch, self.max_wait_ms, self.fit
        )

    def submit(self, inputs: np.ndarray, priority: int = 0, deadline_ms: float | None = None) -> Pending:
        """Admit one request; raises QueueFull or ShuttingDown. Await ``pending.future`` for the Result."""
        loop = asyncio.get_running_loop()
        if self.queue.draining:
            raise ShuttingDown("the server is shutting down; retry on another replica")
        n = int(inputs.shape[0])
        if self.queue.queued_samples + n > self.capacity_samples:
            backlog_ms = self.state(loop.time()).expected_completion_ms(n)
            raise QueueFull(f"queue of pool {self.name!r} is full ({self.capacity_samples} samples)",
                            max(1, int(backlog_ms / 1000 + 0.999)))  # fmt: skip
        now_s = loop.time()
        deadline_s = now_s + deadline_ms / 1000 if deadline_ms is not None else None
        item = Pending(inputs, priority, now_s, deadline_s, loop.create_future())
        if deadline_s is not None:
            item.timer = loop.call_at(deadline_s, self._expire, item)
        self.queue.put(item)
        return item

    def cancel(self, item: Pending) -> None:
        """The client is gone: drop the request if it has not run yet."""
        self.queue.discard(item)
        if item.timer is not None:
            item.timer.cancel()
        if not item.future.done():
            item.future.cancel()

    def _expire(self, item: Pending) -> None:
        if self.queue.discard(item) and not item.future.done():
            item.future.set_exception(DeadlineExceeded("deadline passed before the request could run"))

    def _expire_all(self, items: list[Pending]) -> None:
        for item in items:
            if not item.future.done():
                item.future.set_exception(DeadlineExceeded("deadline passed before the request could run"))

    async def _worker(self, slot: _Slot) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = await self.queue.take(self._expire_all)
            if batch is None:
                return
            items = batch.items
            for item in items:
                if item.timer is not None:
                    item.timer.cancel()  # it runs now: its deadline no longer applies
            n = sum(item.n for item in items)
            expected_ms = self.fit.predict_ms(n)
            slot.busy_until_s = loop.time() + expected_ms / 1000
            try:
                if expected_ms < self.inline_below_ms and self.fit.n_anchors > 0:
                    # A batch faster than the hop to a thread (~50-100 µs of futures and wake-ups) runs
                    # right here; it holds the loop no longer than the hop would have cost.
                    outputs, compute_s = _run_batch(slot.run, items, n)
                else:
                    outputs, compute_s = await loop.run_in_executor(slot.executor, _run_batch, slot.run, items, n)
            except asyncio.CancelledError:
                _fail(items, ShuttingDown("the server stopped before this request ran"))
                raise
            except Exception as exc:  # the model failed: every request of the batch hears about it
                _fail(items, exc if isinstance(exc, ModelError) else ModelError(f"model failed: {exc!r}"[:300]))
                continue
            finally:
                slot.busy_until_s = None
            self.fit.observe(n, compute_s * 1000)
            self.busy_s += compute_s
            queue_s = [batch.dispatched_s - item.enqueued_s for item in items]
            start = 0
            for item, q_s in zip(items, queue_s, strict=True):
                if not item.future.done():  # cancelled while running: nobody to answer
                    rows = outputs[start : start + item.n]
                    item.future.set_result(Result(rows, self.name, n, q_s * 1000, compute_s * 1000))
                start += item.n
            if self.on_batch is not None:
                self.on_batch(self.name, batch, compute_s, queue_s)

    async def warmup(self, example: Callable[[int], np.ndarray], repeats: int = 2) -> None:
        """Run n=1 and n=max_batch on every worker; the last timings anchor the t(n) fit."""
        loop = asyncio.get_running_loop()
        for slot in self._slots:
            for n in sorted({1, self.max_batch}):
                x = example(n)
                items = [Pending(x, 0, 0.0, None, loop.create_future())]
                try:
                    for _ in range(repeats):
                        _, compute_s = await loop.run_in_executor(slot.executor, _run_batch, slot.run, items, n)
                except (RuntimeError, ValueError, IndexError, TypeError, ModelError) as exc:
                    raise WarmupFailed(n, exc) from exc
                self.fit.anchor(n, compute_s * 1000)

    def drain(self) -> None:
        """Stop admitting; flush partial batches at once; workers exit when the queue is empty."""
        self.queue.drain()

    async def join(self, timeout_s: float) -> None:
        """Wait for the workers to drain; after ``timeout_s`` stop them and fail what is left."""
        self.drain()
        if self._tasks:
            _done, pending = await asyncio.wait(self._tasks, timeout=timeout_s)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
        for item in self.queue.live():  # never reached a worker: answer anyway
            self.queue.discard(item)
            _fail([item], ShuttingDown("the server stopped before this request ran"))
        for slot in self._slots:
            slot.executor.shutdown(wait=False, cancel_futures=True)


def _fail(items: list[Pending], exc: BaseException) -> None:
    for item in items:
        if item.timer is not None:
            item.timer.cancel()
        if not item.future.done():
            item.future.set_exception(exc)


def _run_batch(run: RunBatch, items: list[Pending], n: int) -> tuple[np.ndarray, float]:
    """In the worker thread: stack, run, check one output row per input row. Returns (outputs, seconds)."""
    x = items[0].inputs if len(items) == 1 else np.concatenate([item.inputs for item in items])
    t0 = time.perf_counter()
    out = run(x)
    compute_s = time.perf_counter() - t0
    if not isinstance(out, np.ndarray) or out.ndim < 1 or out.shape[0] != n:
        got: Any = getattr(out, "shape", type(out).__name__)
        raise ModelError(f"model returned {got} for a batch of {n}; need one output row per input sample")
    return np.ascontiguousarray(out), compute_s  # row slices of it serialise directly
