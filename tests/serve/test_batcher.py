"""Batch formation (pure) and the Batcher's promises: every request answered once, none run late or cancelled."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import numpy as np
import pytest

from rightsize.serve.batcher import (
    Batcher,
    DeadlineExceeded,
    ModelError,
    Pending,
    QueueFull,
    ShuttingDown,
    dispatch_reason,
    form_batch,
)

T = TypeVar("T")


def run(coro: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(asyncio.wait_for(coro(), 20))  # type: ignore[arg-type]


class FakeModel:
    """run(batch) -> batch.sum(1) after ``delay_s``; records every batch size it saw."""

    def __init__(self, delay_s: float = 0.0, fail: bool = False, wrong_rows: bool = False) -> None:
        self.delay_s, self.fail, self.wrong_rows = delay_s, fail, wrong_rows
        self.sizes: list[int] = []
        self.rows: list[float] = []
        self.lock = threading.Lock()

    def __call__(self, x: np.ndarray) -> np.ndarray:
        with self.lock:
            self.sizes.append(len(x))
            self.rows += x[:, 0].tolist()
        time.sleep(self.delay_s)
        if self.fail:
            raise RuntimeError("boom")
        out = x.sum(axis=1, keepdims=True)
        return out[:-1] if self.wrong_rows else out


def sample(value: float, n: int = 1) -> np.ndarray:
    return np.full((n, 2), value, dtype=np.float32)


def item(n: int, priority: int = 0, deadline_s: float | None = None, seq: int = 0) -> Pending:
    fut: Any = asyncio.Future.__new__(asyncio.Future)  # never awaited: form_batch only asks done()
    fut.done = lambda: False
    return Pending(sample(0.0, n), priority, 0.0, deadline_s, fut, seq)


# --- pure functions ----------------------------------------------------------------------------------


def test_dispatch_reason_rules() -> None:
    assert dispatch_reason(0, None, 8, 0.005, 1.0, False) == (None, None)
    assert dispatch_reason(8, 1.0, 8, 0.005, 1.0, False) == ("full", None)
    assert dispatch_reason(3, 1.0, 8, 0.005, 1.001, False) == (None, pytest.approx(1.005))  # oldest + wait
    assert dispatch_reason(3, 1.0, 8, 0.005, 1.005, False) == ("timeout", None)
    assert dispatch_reason(3, 1.0, 8, 0.005, 1.001, True) == ("drain", None)


def test_form_batch_takes_in_order_without_splitting() -> None:
    a, b, c = item(3, seq=0), item(4, seq=1), item(2, seq=2)
    formed = form_batch(iter([a, b, c]), 8, now_s=0.0)
    assert formed.batch == [a, b] and formed.leftover is c  # 3 + 4 = 7; c (2) would overflow 8


def test_form_batch_sets_aside_expired_and_cancelled() -> None:
    live, late, gone = item(1, seq=0), item(1, deadline_s=0.5, seq=1), item(1, seq=2)
    gone.state = "dropped"
    formed = form_batch(iter([late, gone, live]), 8, now_s=1.0)
    assert formed.batch == [live] and formed.expired == [late] and formed.dropped == [gone]


# --- the Batcher ---------------------------------------------------------------------------------------


def make(model: FakeModel, workers: int = 1, max_batch: int = 4, wait_ms: float = 20.0, cap: int = 64) -> Batcher:
    b = Batcher("p", [model] * workers, max_batch, wait_ms, cap)
    b.start()
    return b


def test_concurrent_requests_form_full_batches_with_right_rows() -> None:
    async def go() -> None:
        model = FakeModel()
        b = make(model, max_batch=4, wait_ms=50.0)
        pend = [b.submit(sample(float(i))) for i in range(8)]
        results = await asyncio.gather(*(p.future for p in pend))
        assert model.sizes == [4, 4]
        assert [float(r.outputs[0, 0]) for r in results] == [2.0 * i for i in range(8)]  # each gets its own row
        assert all(r.batch_size == 4 for r in results)
        await b.join(1.0)

    run(go)


def test_partial_batch_waits_from_the_oldest_request() -> None:
    async def go() -> None:
        model = FakeModel()
        b = make(model, max_batch=8, wait_ms=100.0)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        first = b.submit(sample(1.0))
        await asyncio.sleep(0.08)
        second = b.submit(sample(2.0))
        await asyncio.gather(first.future, second.future)
        elapsed = loop.time() - t0
        assert model.sizes == [2]
        assert 0.095 <= elapsed < 0.17  # 100 ms from the first arrival, not 180 ms (100 from the second)
        await b.join(1.0)

    run(go)


def test_priority_runs_first() -> None:
    async def go() -> None:
        model = FakeModel(delay_s=0.05)
        b = make(model, max_batch=1, wait_ms=0.0)
        blocker = b.submit(sample(-1.0))
        await asyncio.sleep(0.01)  # the worker is busy with the blocker
        low = [b.submit(sample(float(i)), priority=0) for i in range(3)]
        high = b.submit(sample(9.0), priority=5)
        await asyncio.gather(blocker.future, high.future, *(p.future for p in low))
        assert model.rows == [-1.0, 9.0, 0.0, 1.0, 2.0]
        await b.join(1.0)

    run(go)


def test_deadline_passes_before_running_gives_504_and_never_runs() -> None:
    async def go() -> None:
        model = FakeModel(delay_s=0.1)
        b = make(model, max_batch=1, wait_ms=0.0)
        busy = b.submit(sample(-1.0))
        await asyncio.sleep(0.01)
        late = b.submit(sample(7.0), deadline_ms=20.0)
        with pytest.raises(DeadlineExceeded):
            await late.future
        await busy.future
        await asyncio.sleep(0.02)
        assert 7.0 not in model.rows and b.queue.queued_samples == 0
        await b.join(1.0)

    run(go)


def test_cancelled_request_is_dropped_before_the_model_runs() -> None:
    async def go() -> None:
        model = FakeModel(delay_s=0.05)
        b = make(model, max_batch=1, wait_ms=0.0)
        busy = b.submit(sample(-1.0))
        await asyncio.sleep(0.01)
        gone = b.submit(sample(5.0))
        kept = b.submit(sample(6.0))
        b.cancel(gone)
        await asyncio.gather(busy.future, kept.future)
        assert gone.future.cancelled() and model.rows == [-1.0, 6.0]
        await b.join(1.0)

    run(go)


@pytest.mark.parametrize("model", [FakeModel(fail=True), FakeModel(wrong_rows=True)])
def test_model_failure_answers_every_request_of_the_batch(model: FakeModel) -> None:
    async def go() -> None:
        b = make(model, max_batch=4, wait_ms=30.0)
        pend = [b.submit(sample(float(i))) for i in range(3)]
        outcomes = await asyncio.gather(*(p.future for p in pend), return_exceptions=True)
        assert all(isinstance(o, ModelError) for o in outcomes)
        model.fail = model.wrong_rows = False  # the worker survives the failure and serves the next batch
        assert float((await b.submit(sample(1.0)).future).outputs[0, 0]) == 2.0
        await b.join(1.0)

    run(go)


def test_bounded_queue_refuses_with_retry_after() -> None:
    async def go() -> None:
        model = FakeModel(delay_s=0.05)
        b = make(model, max_batch=2, wait_ms=0.0, cap=4)
        admitted = [b.submit(sample(1.0)) for _ in range(4)]
        with pytest.raises(QueueFull) as err:
            b.submit(sample(1.0))
        assert err.value.retry_after_s >= 1
        await asyncio.gather(*(p.future for p in admitted))
        await b.join(1.0)

    run(go)


def test_drain_flushes_partial_batch_then_refuses() -> None:
    async def go() -> None:
        model = FakeModel()
        reasons: list[str] = []
        b = Batcher("p", [model], 8, 10_000.0, 64, on_batch=lambda _p, batch, _c, _q: reasons.append(batch.reason))
        b.start()
        pend = [b.submit(sample(1.0)) for _ in range(3)]
        await asyncio.sleep(0.01)
        assert not any(p.future.done() for p in pend)  # a 10 s window: still waiting
        await b.join(2.0)
        assert all(p.future.result().batch_size == 3 for p in pend) and reasons == ["drain"]
        with pytest.raises(ShuttingDown):
            b.submit(sample(1.0))

    run(go)


def test_join_timeout_answers_what_is_left() -> None:
    async def go() -> None:
        model = FakeModel(delay_s=0.3)
        b = make(model, max_batch=1, wait_ms=0.0)
        pend = [b.submit(sample(float(i))) for i in range(3)]
        await asyncio.sleep(0.01)
        await b.join(0.05)
        outcomes = await asyncio.gather(*(p.future for p in pend), return_exceptions=True)
        assert all(isinstance(o, ShuttingDown) for o in outcomes)  # none hangs, none lost

    run(go)
