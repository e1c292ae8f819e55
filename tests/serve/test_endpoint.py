"""Reading a request body (both servers' reader): whole across chunks, bounded in size, and a client that leaves."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from rightsize.serve.endpoint import ClientGone, read_body
from rightsize.wire import BodyError


def _receiver(*messages: dict[str, Any]) -> Any:
    queue = list(messages)

    async def receive() -> dict[str, Any]:
        return queue.pop(0) if queue else {"type": "http.disconnect"}

    return receive


def _read(receive: Any, declared: bytes | None = None, limit: int = 100) -> bytes:
    return asyncio.run(read_body(receive, declared, limit))


def test_a_body_arrives_whole_across_chunks() -> None:
    chunks = _receiver(
        {"type": "http.request", "body": b"ab", "more_body": True}, {"type": "http.request", "body": b"c"}
    )
    assert _read(chunks) == b"abc"


def test_size_limit_and_a_client_that_leaves() -> None:
    with pytest.raises(BodyError) as err:
        _read(_receiver(), b"101")
    assert err.value.status == 413
    big = _receiver({"type": "http.request", "body": b"x" * 101})
    with pytest.raises(BodyError):
        _read(big)
    with pytest.raises(ClientGone):
        _read(_receiver({"type": "http.request", "body": b"x", "more_body": True}))
