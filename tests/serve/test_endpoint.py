"""Reading a request body: whole, bounded in size, and bounded in time when the client stalls mid-body."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from rightsize.serve.endpoint import ClientGone, read_body
from rightsize.wire import BodyError


def _receiver(*messages: dict[str, Any], then_stall: bool = False) -> Any:
    queue = list(messages)

    async def receive() -> dict[str, Any]:
        if queue:
            return queue.pop(0)
        if then_stall:
            await asyncio.sleep(3600)  # a client that stopped sending and never left
        return {"type": "http.disconnect"}

    return receive


def _read(receive: Any, declared: bytes | None = None, limit: int = 100, timeout_s: float = 30.0) -> bytes:
    return asyncio.run(read_body(receive, declared, limit, timeout_s))


def test_a_body_arrives_whole_across_chunks() -> None:
    chunks = _receiver(
        {"type": "http.request", "body": b"ab", "more_body": True}, {"type": "http.request", "body": b"c"}
    )
    assert _read(chunks) == b"abc"


def test_a_stalled_body_is_answered_408_not_held_until_the_client_leaves() -> None:
    """A client that sent 10 of 100 declared bytes and stopped had held its request until it disconnected (then
    counted 499); it gets 408 once the timeout passes with nothing more."""
    stalled = _receiver({"type": "http.request", "body": b"x" * 10, "more_body": True}, then_stall=True)
    with pytest.raises(BodyError) as err:
        _read(stalled, b"100", timeout_s=0.05)
    assert err.value.status == 408 and "10 bytes" in err.value.detail


def test_size_limit_and_a_client_that_leaves() -> None:
    with pytest.raises(BodyError) as err:
        _read(_receiver(), b"101")
    assert err.value.status == 413
    big = _receiver({"type": "http.request", "body": b"x" * 101})
    with pytest.raises(BodyError):
        _read(big)
    with pytest.raises(ClientGone):
        _read(_receiver({"type": "http.request", "body": b"x", "more_body": True}))
