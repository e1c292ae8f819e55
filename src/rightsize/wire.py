"""Request and response bodies: JSON and a compact binary tensor format, validated against the model.

JSON request (``Content-Type: application/json``)::

    {"inputs": [[...], ...], "priority": 0, "deadline_ms": null}

``inputs`` holds one or more samples; each sample has the model's sample shape (features ``[F]``, image
``[3, H, W]``, tokens ``[S]`` as integer ids below the vocabulary).

Binary tensor (``Content-Type: application/octet-stream``), little-endian, C order::

    offset  size       field
    0       4          magic  b"RSZT"
    4       1          version = 1
    5       1          dtype code: 1 float32 | 2 float16 | 3 float64 | 4 int64 | 5 int32
    6       1          ndim (1..8); shape[0] is the number of samples
    7       1          reserved, 0
    8       4 * ndim   shape, uint32 each
    8+4*ndim  ...      data, prod(shape) * itemsize bytes

Priority and deadline travel in the headers ``X-Priority`` and ``X-Deadline-Ms`` (JSON body fields win).
Responses are JSON ``{"outputs": [...]}`` or, with ``Accept: application/octet-stream``, the same binary
format. Every problem with a body raises ``BodyError`` carrying a 4xx status, never a 5xx.
"""

from __future__ import annotations

import importlib
import json
import math
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from rightsize.errors import did_you_mean

_orjson: Any
try:  # orjson is several times faster for these bodies; the stdlib is the fallback
    _orjson = importlib.import_module("orjson")
except ImportError:  # pragma: no cover - depends on the environment
    _orjson = None

__all__ = [
    "BINARY_TYPE",
    "BodyError",
    "InputSpec",
    "ParsedRequest",
    "decode_tensor",
    "dumps",
    "encode_tensor",
    "parse_binary_request",
    "parse_json_request",
]

BINARY_TYPE = "application/octet-stream"
MAGIC = b"RSZT"
VERSION = 1
MAX_NDIM = 8
DTYPE_BY_CODE: dict[int, np.dtype[Any]] = {
    1: np.dtype("<f4"),
    2: np.dtype("<f2"),
    3: np.dtype("<f8"),
    4: np.dtype("<i8"),
    5: np.dtype("<i4"),
}
CODE_BY_DTYPE = {dt.name: code for code, dt in DTYPE_BY_CODE.items()}
MAX_PRIORITY = 1000
FIELDS = ("inputs", "priority", "deadline_ms")  # a JSON body's
MAX_DEADLINE_MS = 3_600_000.0


class BodyError(Exception):
    """A request body the server refuses: ``status`` is 400, 413, 415 or 422."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


@dataclass(frozen=True)
class InputSpec:
    """What one sample must look like."""

    sample_shape: tuple[int, ...]
    dtype: str  # "float32" | "int64"
    max_value: int | None = None  # int64 inputs: exclusive upper bound (vocabulary size)
    max_samples: int = 8  # samples per request


# The most bytes one number of a valid request takes: a JSON number at its longest (-1.2345678901234567e-308, 24
# characters) with its comma and the indentation of a pretty-printed nested list; a binary body takes 8 at most.
BODY_BYTES_PER_NUMBER = 64
BODY_SLACK_BYTES = 64 * 1024  # the object's keys, priority, deadline_ms, whitespace


def largest_body_bytes(spec: InputSpec) -> int:
    """The most bytes a valid request for ``spec`` can take: ``max_samples`` samples, every number as long as JSON
    allows. A larger body is refused from its Content-Length, before it is read: parsing JSON holds Python's GIL, so a
    50 MB body for a server of 8 short samples had stalled /healthz and every other request for 3 s."""
    return spec.max_samples * math.prod(spec.sample_shape) * BODY_BYTES_PER_NUMBER + BODY_SLACK_BYTES


@dataclass(frozen=True)
class ParsedRequest:
    inputs: np.ndarray  # [n, *sample_shape], dtype float32 or int64
    priority: int
    deadline_ms: float | None


def dumps(obj: Any) -> bytes:
    """JSON bytes; numpy arrays serialise natively with orjson."""
    if _orjson is not None:
        return _orjson.dumps(obj, option=_orjson.OPT_SERIALIZE_NUMPY)
    return json.dumps(obj, default=_np_default, separators=(",", ":")).encode()


def _np_default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray | np.generic):
        return obj.tolist()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # as orjson says: RFC 8259 has no NaN or Infinity


def finite_float(text: str) -> float:
    """A JSON number as float; ValueError past float range (1e400 read as inf), as orjson refuses it."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:40]} is out of range")
    return value


def loads_strict(body: bytes | str) -> Any:
    """``json.loads`` that refuses what JSON has not: NaN, Infinity, numbers past float range (ValueError)."""
    return json.loads(body, parse_constant=_no_constant, parse_float=finite_float)


def _loads(body: bytes) -> Any:
    try:
        return _orjson.loads(body) if _orjson is not None else loads_strict(body)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise BodyError(400, _not_json(body, exc)) from None


def _not_json(body: bytes, exc: BaseException) -> str:
    """Why a body is not JSON, said plainly: orjson calls bytes that are not UTF-8 "str is not valid UTF-8:
    surrogates not allowed", which the client never sent."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as bad:
        return f"body is not valid UTF-8 (byte 0x{body[bad.start]:02x} at position {bad.start}); send JSON as UTF-8"
    return f"body is not valid JSON: {str(exc)[:120]}"


# --- binary tensors --------------------------------------------------------------------------------


def encode_tensor(array: np.ndarray) -> bytes:
    """The binary format above; float32/float16/float64/int64/int32 arrays with 1..8 dimensions."""
    arr = np.ascontiguousarray(array)
    code = CODE_BY_DTYPE.get(arr.dtype.name)
    if code is None or not 1 <= arr.ndim <= MAX_NDIM:
        raise ValueError(f"cannot encode dtype {arr.dtype} with {arr.ndim} dimensions")
    header = struct.pack(f"<4sBBBB{arr.ndim}I", MAGIC, VERSION, code, arr.ndim, 0, *arr.shape)
    return header + arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()


def decode_tensor(body: bytes) -> np.ndarray:
    """The array in a binary body (read-only view of ``body``); BodyError 400 when malformed."""
    if len(body) < 8 or body[:4] != MAGIC:
        raise BodyError(400, "binary body must start with the 8-byte header b'RSZT' version dtype ndim 0")
    version, code, ndim, reserved = body[4], body[5], body[6], body[7]
    if version != VERSION:
        raise BodyError(400, f"binary body version {version} is not supported; use {VERSION}")
    if reserved != 0:  # kept 0 so a later version can give it a meaning without old servers misreading it
        raise BodyError(400, f"binary header byte 7 is reserved and must be 0, got {reserved}")
    dtype = DTYPE_BY_CODE.get(code)
    if dtype is None:
        raise BodyError(400, f"binary dtype code {code} is unknown; use one of {sorted(DTYPE_BY_CODE)}")
    if not 1 <= ndim <= MAX_NDIM:
        raise BodyError(400, f"binary ndim must be 1..{MAX_NDIM}, got {ndim}")
    end = 8 + 4 * ndim
    if len(body) < end:
        raise BodyError(400, "binary body is shorter than its header")
    shape = struct.unpack_from(f"<{ndim}I", body, 8)
    count = math.prod(shape)
    if len(body) - end != count * dtype.itemsize:
        raise BodyError(400, f"binary body has {len(body) - end} data bytes; shape {list(shape)} needs "
                        f"{count * dtype.itemsize}")  # fmt: skip
    return np.frombuffer(body, dtype=dtype, count=count, offset=end).reshape(shape)


# --- validation ------------------------------------------------------------------------------------


def check_inputs(array: np.ndarray, spec: InputSpec) -> np.ndarray:
    """``array`` as [n, *sample_shape] in the model's dtype; BodyError 413/422 otherwise."""
    kind = array.dtype.kind
    if kind not in "iuf":
        raise BodyError(422, f"inputs must be numbers, got {'booleans' if kind == 'b' else 'non-numeric values'}")
    if array.ndim != 1 + len(spec.sample_shape) or tuple(array.shape[1:]) != spec.sample_shape:
        raise BodyError(422, f"inputs must have shape [n, {', '.join(map(str, spec.sample_shape))}] "
                        f"(a list of samples), got {list(array.shape)}")  # fmt: skip
    n = array.shape[0]
    if n < 1:
        raise BodyError(422, "inputs must hold at least one sample")
    if n > spec.max_samples:
        raise BodyError(413, f"{n} samples in one request; at most {spec.max_samples} (the server's max batch)")
    if spec.dtype == "int64":
        if kind == "f":
            whole = array.size and np.isfinite(array).all() and (array == np.floor(array)).all()
            if whole and (array.min() < 0 or (spec.max_value is not None and array.max() >= spec.max_value)):
                raise BodyError(422, f"token ids must be integers in [0, {spec.max_value}), got "
                                f"[{array.min():.6g}, {array.max():.6g}]")  # fmt: skip  # 1e30 came as a float
            raise BodyError(422, "inputs must be integer token ids, got floating-point numbers")
        if array.size and (int(array.min()) < 0 or (spec.max_value is not None and int(array.max()) >= spec.max_value)):
            raise BodyError(422, f"token ids must be in [0, {spec.max_value}), got [{array.min()}, {array.max()}]")
        return array.astype(np.int64, copy=False)
    with np.errstate(over="ignore"):  # overflow becomes inf, refused just below
        out = array.astype(np.float32, copy=False)
    if not np.isfinite(out).all():
        raise BodyError(422, "inputs must be finite numbers (no NaN or infinity, none beyond float32 range)")
    return out


def _priority(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, str):
        try:
            value = int(value)
        except ValueError:
            raise BodyError(422, f"priority must be an integer, got {value[:40]!r}") from None
    if isinstance(value, bool) or not isinstance(value, int) or abs(value) > MAX_PRIORITY:
        raise BodyError(422, f"priority must be an integer in [-{MAX_PRIORITY}, {MAX_PRIORITY}], got {value!r}"[:160])
    return value


def _deadline(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise BodyError(422, f"deadline_ms must be a number, got {value[:40]!r}") from None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= MAX_DEADLINE_MS:
        raise BodyError(422, f"deadline_ms must be a number in (0, {MAX_DEADLINE_MS:.0f}] or null, got {value!r}"[:160])
    return float(value)


def parse_json_request(body: bytes, spec: InputSpec, priority: Any = None, deadline_ms: Any = None) -> ParsedRequest:
    """A JSON body -> validated inputs; ``priority``/``deadline_ms`` are header fallbacks."""
    doc = _loads(body)
    if not isinstance(doc, dict):
        raise BodyError(422, 'body must be a JSON object with "inputs": a list of samples')
    for key in doc:
        if key not in FIELDS:  # a misspelt priority had been dropped unsaid
            hint = did_you_mean(key, FIELDS) if len(key) <= 64 else ""
            shown = key if len(key) <= 60 else key[:57] + "..."
            raise BodyError(422, f"{shown}: unknown field.{hint} Fields: {', '.join(FIELDS)}")
    if "inputs" not in doc:
        raise BodyError(422, f'body must have "inputs": a list of samples. Fields: {", ".join(FIELDS)}')
    raw = doc["inputs"]
    if not isinstance(raw, list):
        raise BodyError(422, '"inputs" must be a list of samples')
    if spec.sample_shape and raw and not isinstance(raw[0], list):  # one sample's numbers, not a list of samples
        raise BodyError(422, f"inputs must be a list of samples of shape {list(spec.sample_shape)}: wrap one sample "
                        "in a list ([[...]])")  # fmt: skip
    if len(raw) > spec.max_samples:  # before converting: a huge list is refused cheaply
        raise BodyError(413, f"{len(raw)} samples in one request; at most {spec.max_samples} (the server's max batch)")
    try:
        array = np.asarray(raw)
    except (ValueError, TypeError, OverflowError, RecursionError):
        raise BodyError(
            422, f"inputs must be a rectangular list of samples of shape {list(spec.sample_shape)}"
        ) from None
    # numpy turns [true, 0.5] into [1.0, 0.5]: a boolean among numbers is looked for in the JSON itself, which costs
    # a walk only when the body spells one
    if array.dtype.kind != "b" and (b"true" in body or b"false" in body) and _holds_bool(raw):
        raise BodyError(422, "inputs must be numbers, got booleans among them")
    inputs = check_inputs(array, spec)
    return ParsedRequest(
        inputs,
        _priority(doc.get("priority", priority)),
        _deadline(doc.get("deadline_ms", deadline_ms)),
    )


def _holds_bool(raw: list[Any]) -> bool:
    """Whether a (rectangular, already converted) list of lists holds a JSON true or false anywhere."""
    stack: list[Any] = [raw]
    while stack:
        items = stack.pop()
        for x in items:
            if isinstance(x, bool):
                return True
            if isinstance(x, list):
                stack.append(x)
    return False


def parse_binary_request(body: bytes, spec: InputSpec, priority: Any = None, deadline_ms: Any = None) -> ParsedRequest:
    """A binary tensor body -> validated inputs; priority and deadline come from headers."""
    array = decode_tensor(body)
    if spec.dtype == "int64" and array.dtype.kind == "f":  # whole-number ids had been answered "must be integers"
        name, code = array.dtype.name, CODE_BY_DTYPE
        raise BodyError(422, f"binary dtype is {name} (code {code[name]}); token ids need int64 (code {code['int64']}) "
                        f"or int32 (code {code['int32']})")  # fmt: skip
    return ParsedRequest(check_inputs(array, spec), _priority(priority), _deadline(deadline_ms))
