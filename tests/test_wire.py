"""Body parsing: every malformed, oversized or wrongly shaped body is a BodyError with a 4xx status."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rightsize.wire import (
    BodyError,
    InputSpec,
    decode_tensor,
    encode_tensor,
    largest_body_bytes,
    parse_binary_request,
    parse_json_request,
)

FEATURES = InputSpec((4,), "float32", None, max_samples=8)
TOKENS = InputSpec((3,), "int64", max_value=1000, max_samples=8)
IMAGE = InputSpec((3, 2, 2), "float32", None, max_samples=8)


def status_of(body: bytes, spec: InputSpec = FEATURES) -> int:
    try:
        parse_json_request(body, spec)
    except BodyError as exc:
        return exc.status
    return 200


def test_json_valid_features_and_fields() -> None:
    req = parse_json_request(b'{"inputs": [[1, 2, 3, 4], [0.5, 0, 0, 1]], "priority": 3, "deadline_ms": 250}', FEATURES)
    assert req.inputs.shape == (2, 4) and req.inputs.dtype == np.float32
    assert req.inputs[1, 0] == pytest.approx(0.5)
    assert (req.priority, req.deadline_ms) == (3, 250.0)


def test_json_header_fallbacks_and_body_precedence() -> None:
    req = parse_json_request(b'{"inputs": [[1, 2, 3, 4]]}', FEATURES, priority="7", deadline_ms="12.5")
    assert (req.priority, req.deadline_ms) == (7, 12.5)
    req = parse_json_request(b'{"inputs": [[1, 2, 3, 4]], "priority": -2}', FEATURES, priority="7")
    assert req.priority == -2


@pytest.mark.parametrize(
    ("body", "status"),
    [
        (b"", 400),
        (b"{", 400),
        (b"[1, 2]", 422),
        (b'{"x": 1}', 422),
        (b'{"inputs": 5}', 422),
        (b'{"inputs": []}', 422),
        (b'{"inputs": [1, 2, 3, 4]}', 422),  # one sample without the batch dimension
        (b'{"inputs": [' + b",".join([b"1"] * 16) + b"]}", 422),  # the same, longer than max batch: a shape error
        (b'{"inputs": [[1, 2, 3]]}', 422),
        (b'{"inputs": [[1, 2, 3, 4], [1, 2]]}', 422),  # ragged
        (b'{"inputs": [["a", "b", "c", "d"]]}', 422),
        (b'{"inputs": [[true, false, true, true]]}', 422),
        (b'{"inputs": [[true, 0.5, 0, 0]]}', 422),  # numpy reads [true, 0.5] as [1.0, 0.5]: it was a 200
        (b'{"inputs": [[1, 2, 3, 4], [0, false, 0, 0]]}', 422),
        (b'{"inputs": [[1e39, 0, 0, 0]]}', 422),  # beyond float32
        (b'{"inputs": [[1, 2, 3, {}]]}', 422),
        (b'{"inputs": [[1, 2, 3, 4]], "priority": 1.5}', 422),
        (b'{"inputs": [[1, 2, 3, 4]], "priority": 100000}', 422),
        (b'{"inputs": [[1, 2, 3, 4]], "deadline_ms": -1}', 422),
        (b'{"inputs": [[1, 2, 3, 4]], "deadline_ms": "soon"}', 422),
        (b'{"inputs": [' + b",".join([b"[1, 2, 3, 4]"] * 9) + b"]}", 413),  # more samples than max batch
        (b"[" * 5000 + b"]" * 5000, 400),  # nesting deeper than the parser allows
    ],
)
def test_json_rejections(body: bytes, status: int) -> None:
    assert status_of(body) == status


def test_tokens_must_be_integer_ids_below_vocab() -> None:
    assert parse_json_request(b'{"inputs": [[0, 5, 999]]}', TOKENS).inputs.dtype == np.int64
    assert status_of(b'{"inputs": [[0, 5, 1000]]}', TOKENS) == 422
    assert status_of(b'{"inputs": [[0, -1, 3]]}', TOKENS) == 422
    assert status_of(b'{"inputs": [[0, 1.5, 3]]}', TOKENS) == 422
    assert status_of(b'{"inputs": [[0, 100000000000000000000000, 3]]}', TOKENS) == 422
    with pytest.raises(BodyError, match=r"token ids must be integers in \[0, 1000\), got \[0, 1e\+30\]"):
        parse_json_request(b'{"inputs": [[0, 1000000000000000000000000000000, 3]]}', TOKENS)  # not "floating-point"
    assert status_of(b'{"inputs": [[true, 0, 3]]}', TOKENS) == 422
    with pytest.raises(BodyError, match=r"^note: unknown field\. Fields: inputs, priority, deadline_ms$"):
        parse_json_request(b'{"inputs": [[1, 0, 3]], "note": "true"}', TOKENS)  # an unknown field had passed unsaid


def test_binary_round_trip_and_request() -> None:
    x = np.arange(2 * 3 * 2 * 2, dtype=np.float32).reshape(2, 3, 2, 2)
    body = encode_tensor(x)
    assert len(body) == 8 + 4 * 4 + x.nbytes
    np.testing.assert_array_equal(decode_tensor(body), x)
    req = parse_binary_request(body, IMAGE, priority="1", deadline_ms=None)
    assert req.inputs.shape == (2, 3, 2, 2) and req.priority == 1
    ids = encode_tensor(np.array([[1, 2, 3]], dtype=np.int32))
    assert parse_binary_request(ids, TOKENS).inputs.dtype == np.int64


def _header(
    code: int = 1, ndim: int = 2, shape: tuple[int, ...] = (1, 4), magic: bytes = b"RSZT", v: int = 1, reserved: int = 0
) -> bytes:
    return struct.pack(f"<4sBBBB{len(shape)}I", magic, v, code, ndim, reserved, *shape)


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"RSZT",
        _header(magic=b"NOPE") + bytes(16),
        _header(v=2) + bytes(16),
        _header(reserved=7) + bytes(16),  # the reserved byte must be 0
        _header(code=9) + bytes(16),
        _header(ndim=0, shape=()) + bytes(16),
        _header(ndim=3, shape=(1, 4)),  # header claims more dims than it has
        _header() + bytes(15),  # one byte short
        _header() + bytes(17),
        _header(shape=(4294967295, 4294967295)) + bytes(16),
    ],
)
def test_binary_malformed_is_400(body: bytes) -> None:
    with pytest.raises(BodyError) as err:
        parse_binary_request(body, FEATURES)
    assert err.value.status == 400


def test_binary_wrong_shape_or_dtype_is_422() -> None:
    with pytest.raises(BodyError) as err:
        parse_binary_request(encode_tensor(np.zeros((1, 5), np.float32)), FEATURES)
    assert err.value.status == 422
    with pytest.raises(BodyError) as err:
        parse_binary_request(encode_tensor(np.zeros((1, 3), np.float32)), TOKENS)
    assert err.value.status == 422


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda children: st.lists(children, max_size=6) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=40,
)


@settings(max_examples=150, deadline=None)
@given(doc=json_values, spec=st.sampled_from([FEATURES, TOKENS, IMAGE]))
def test_fuzz_json_never_crashes(doc: object, spec: InputSpec) -> None:
    body = json.dumps(doc if isinstance(doc, dict) else {"inputs": doc}).encode()  # stdlib: big ints, Infinity
    try:
        req = parse_json_request(body, spec)
    except BodyError as exc:
        assert 400 <= exc.status < 500
    else:
        assert req.inputs.shape[1:] == spec.sample_shape and 1 <= req.inputs.shape[0] <= spec.max_samples


@settings(max_examples=150, deadline=None)
@given(body=st.binary(max_size=64) | st.builds(lambda h, t: h + t, st.just(_header()), st.binary(max_size=40)))
def test_fuzz_binary_never_crashes(body: bytes) -> None:
    try:
        parse_binary_request(body, FEATURES)
    except BodyError as exc:
        assert 400 <= exc.status < 500


@pytest.mark.parametrize("parser", ["orjson", "stdlib"])
@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity", b"1e400"])
def test_nan_and_infinity_literals_are_not_json_with_either_parser(
    parser: str, literal: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stdlib parser reads ``NaN`` (a 422 later); orjson refuses it (400): the answer hung on what was installed."""
    import rightsize.wire as wire

    if parser == "stdlib":
        monkeypatch.setattr(wire, "_orjson", None)
    elif wire._orjson is None:
        pytest.skip("orjson is not installed")
    assert status_of(b'{"inputs": [[' + literal + b", 0, 0, 0]]}") == 400


@pytest.mark.parametrize("spec", [FEATURES, TOKENS, IMAGE], ids=["features", "tokens", "image"])
def test_the_body_limit_holds_the_longest_valid_request_and_little_more(spec: InputSpec) -> None:
    """A body past ``largest_body_bytes`` is refused unread (a 50 MB body for 8 short samples stalled the server while
    it was parsed): the limit must hold every valid request, pretty-printed with the longest numbers JSON has."""
    value = 1 if spec.dtype == "int64" else -1.2345678901234567e-308
    inputs = np.full((spec.max_samples, *spec.sample_shape), value).tolist()
    body = json.dumps({"inputs": inputs, "priority": -1000, "deadline_ms": 3_599_999.5}, indent=8).encode()
    assert len(body) <= largest_body_bytes(spec)
    assert parse_json_request(body, spec).inputs.shape == (spec.max_samples, *spec.sample_shape)
    assert largest_body_bytes(spec) < 200_000  # 8 samples of a few numbers: not the 64 MiB default
