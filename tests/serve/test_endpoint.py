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


SAMPLE = [101, 203, 200, 137, 331, 102] + [0] * 10


@pytest.mark.parametrize(
    ("body", "status", "detail"),
    [
        # orjson's "str is not valid UTF-8: surrogates not allowed" named surrogates the client never sent
        (b"\xff\xfe\x00", 400, "body is not valid UTF-8 (byte 0xff at position 0); send JSON as UTF-8"),
        (b'{"inputs": "\xff"}', 400, "body is not valid UTF-8 (byte 0xff at position 12); send JSON as UTF-8"),
        # a misspelt field had been told only that "inputs" was missing; an unknown one was dropped unsaid (200)
        (b'{"input": [[1]]}', 422,
         "input: unknown field. Did you mean 'inputs'? Fields: inputs, priority, deadline_ms"),
        (b'{"inputs": [[1]], "priorty": 1}', 422,
         "priorty: unknown field. Did you mean 'priority'? Fields: inputs, priority, deadline_ms"),
        (b'{"inputs": [[1]], "foo": 1}', 422, "foo: unknown field. Fields: inputs, priority, deadline_ms"),
        (b"{}", 422, 'body must have "inputs": a list of samples. Fields: inputs, priority, deadline_ms'),
        # whole-number floats had been told "token ids must be integers in [0, 1000), got [0, 331]"
        (b'{"inputs": [[1.0, 2.0' + b", 0" * 14 + b"]]}", 422,
         "inputs must be integer token ids, got floating-point numbers"),
    ],
)  # fmt: skip
def test_json_refusals_name_the_fix(body: bytes, status: int, detail: str) -> None:
    assert _answer(body) == (status, {"detail": detail})


def test_documented_fields_are_accepted_past_the_field_check() -> None:
    body = b'{"inputs": [[1.5]], "priority": 1, "deadline_ms": null}'  # refused for its ids, not for a field
    assert _answer(body) == (422, {"detail": "inputs must have shape [n, 16] (a list of samples), got [1, 1]"})


def test_float32_binary_token_ids_name_the_integer_dtypes() -> None:
    import numpy as np

    from rightsize.wire import encode_tensor, parse_binary_request

    body = encode_tensor(np.array([SAMPLE], dtype=np.float32))  # whole numbers, in range: the dtype is the fault
    detail = "binary dtype is float32 (code 1); token ids need int64 (code 4) or int32 (code 5)"
    assert _answer(body, b"application/octet-stream") == (422, {"detail": detail})
    spec = _token_endpoint().svc.spec  # the same ids as int32 pass
    assert parse_binary_request(encode_tensor(np.array([SAMPLE], dtype=np.int32)), spec).inputs.tolist() == [SAMPLE]


def test_the_413_says_where_the_limit_comes_from_and_the_fix() -> None:
    status, reply = _answer(b'{"inputs": [' + b" " * 80000 + b"]}")
    assert (status, reply["detail"]) == (413, "body must be at most 73728 bytes (the largest valid request: "
                                         "--max-batch 8 samples of shape [16] as JSON); split it into requests of at "
                                         "most 8 samples, raise --max-batch, or send the binary format "
                                         "(application/octet-stream)")  # fmt: skip


@pytest.mark.parametrize("method", ["GET", "PUT", "HEAD", "OPTIONS"])
def test_other_methods_are_405_from_the_endpoint(method: str) -> None:
    assert _answer(b"", method=method) == (405, {"detail": f"{method} is not allowed on /v1/predict; use POST"})
