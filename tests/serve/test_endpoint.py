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


def test_a_body_larger_than_any_valid_request_is_refused_unread() -> None:
    """54 MB of JSON for a server of 8 samples of 16 token ids had been read and parsed (413 only then), holding the
    GIL for 3 s: /healthz and every other request waited. The limit is what a valid request can take."""
    from types import SimpleNamespace

    from rightsize.serve.endpoint import PredictEndpoint
    from rightsize.wire import InputSpec, largest_body_bytes

    spec = InputSpec((16,), "int64", max_value=1000, max_samples=8)
    endpoint = PredictEndpoint(SimpleNamespace(spec=spec), None, 64 * 2**20)  # type: ignore[arg-type]
    assert endpoint.limit == largest_body_bytes(spec) < 2**20
    scope = {"method": "POST", "headers": [(b"content-type", b"application/json"), (b"content-length", b"54400000")]}
    status, _, body = asyncio.run(endpoint.reply(scope, _receiver()))  # nothing of the body is ever received
    assert status == 413 and f"body must be at most {endpoint.limit} bytes".encode() in body
    assert PredictEndpoint(SimpleNamespace(spec=spec), None, 1000).limit == 1000  # --max-body-bytes, when smaller


def _token_endpoint() -> Any:
    from types import SimpleNamespace

    from rightsize.serve.endpoint import PredictEndpoint
    from rightsize.wire import InputSpec

    spec = InputSpec((16,), "int64", max_value=1000, max_samples=8)  # distilbert --tiny --seq 16
    return PredictEndpoint(SimpleNamespace(spec=spec), None, 64 * 2**20)  # type: ignore[arg-type]


def _answer(body: bytes, ctype: bytes = b"application/json", method: str = "POST") -> tuple[int, dict[str, Any]]:
    import json

    scope = {"method": method, "path": "/v1/predict", "headers": [(b"content-type", ctype)]}
    status, _, reply = asyncio.run(_token_endpoint().reply(scope, _receiver({"type": "http.request", "body": body})))
    return status, json.loads(reply)


@pytest.mark.parametrize("method", ["GET", "PUT", "HEAD", "OPTIONS"])
def test_other_methods_are_405_from_the_endpoint(method: str) -> None:
    assert _answer(b"", method=method) == (405, {"detail": f"{method} is not allowed on /v1/predict; use POST"})
