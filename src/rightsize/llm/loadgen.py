"""Open-loop load for a generation server: TTFT and TPOT as a client sees them, per request.

    result = run_generation_load("http://127.0.0.1:8000", offsets_s, prompts, outputs)
    result.summary()["ttft_ms"]["p95"], result.summary()["tpot_ms"]["p50"]

Each request is sent at its intended time from a schedule fixed before the run (``loadgen.schedule``:
coordinated-omission free, as the inference load generator), on its own connection: POST /v1/generate
with ``{"prompt_len", "max_new_tokens", "stream": true}``. The reply is read chunk by chunk (HTTP/1.1
chunked transfer, server-sent events ``data: {"t": id}``); a token's time is when its chunk arrived.

    TTFT = first token's arrival - intended send time      (queueing + prefill + the wire)
    TPOT = (last token's arrival - first token's) / (tokens - 1)

A run is valid when every request was answered and the send lag (actual - intended send) stays small;
both are in the summary, as the inference generator's are.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from rightsize.loadgen.target import bearer_header

__all__ = ["QUANTITIES", "GenLoadResult", "GenResult", "load_problems", "run_generation_load"]

MAX_SEND_LAG_MS = 10.0  # p99 send lag beyond this: the generator, not the server, shaped the arrivals
# What a generative validation compares per load level, simulator vs measured (workflows.validate_generate, the
# dashboard's run page)
QUANTITIES = ("ttft_p50", "ttft_p95", "tpot_p50")


def load_problems(sent: Any, answered: Any, send_lag_p99_ms: Any, recorded: Any = None) -> list[str]:
    """Why a generation load test is not valid (empty: valid): requests left unanswered, a warm-up that left none
    recorded, or a generator that sent late. Its summary's ``valid`` and the dashboard's reasons, from the stored
    summary's numbers (``recorded``: absent from summaries stored before it was counted)."""
    out = []
    if isinstance(sent, int) and isinstance(answered, int) and answered < sent:
        out.append(f"{sent - answered} of {sent} requests unanswered")
    if isinstance(recorded, int) and isinstance(answered, int) and answered and not recorded:
        out.append("no answered request came after the warm-up: nothing was recorded")
    if isinstance(send_lag_p99_ms, (int, float)) and send_lag_p99_ms > MAX_SEND_LAG_MS:  # NaN: none sent, no lag
        out.append(f"send lag p99 {send_lag_p99_ms:.1f} ms > {MAX_SEND_LAG_MS:g} ms")
    return out


@dataclass(frozen=True)
class GenResult:
    """One request: times in seconds from the run's start (perf_counter based)."""

    intended_s: float
    sent_s: float
    first_s: float  # NaN: no token
    last_s: float
    tokens: int
    status: int  # HTTP status; 0: no complete reply (connection failed, cut or timed out: see error)
    error: str = ""
    detail: str = ""  # a refusal's reason (the body of a 4xx/5xx reply: the server's ``detail``)

    @property
    def ttft_ms(self) -> float:
        return (self.first_s - self.intended_s) * 1e3

    @property
    def tpot_ms(self) -> float:
        return (self.last_s - self.first_s) * 1e3 / (self.tokens - 1) if self.tokens > 1 else math.nan


@dataclass(frozen=True)
class GenLoadResult:
    results: list[GenResult]
    duration_s: float

    def ok(self) -> list[GenResult]:
        return [r for r in self.results if r.status == 200 and r.tokens > 0]

    def summary(self, record_from_s: float = 0.0) -> dict[str, Any]:
        """Percentiles over the answered requests intended at or after ``record_from_s``."""
        ok = [r for r in self.ok() if r.intended_s >= record_from_s]
        lag = np.array([(r.sent_s - r.intended_s) * 1e3 for r in self.results if r.status])
        statuses: dict[str, int] = {}
        errors: dict[str, int] = {}  # no complete reply (status 0), by cause: "TimeoutError (HTTP -)", ...
        refusals: dict[str, str] = {}  # a refused status's reason, the first seen: {"413": "prompt_len ..."}
        for r in self.results:
            statuses[str(r.status)] = statuses.get(str(r.status), 0) + 1
            if r.error:
                errors[r.error] = errors.get(r.error, 0) + 1
            if r.detail:
                refusals.setdefault(str(r.status), r.detail)
        p99_lag = float(np.percentile(lag, 99)) if lag.size else math.nan
        answered = len(self.ok())
        return {
            "sent": len(self.results), "answered": answered, "recorded": len(ok), "statuses": statuses,
            "ttft_ms": _pct([r.ttft_ms for r in ok]), "tpot_ms": _pct([r.tpot_ms for r in ok if r.tokens > 1]),
            "output_tokens_per_s": sum(r.tokens for r in self.results) / self.duration_s if self.duration_s else 0.0,
            "send_lag_p99_ms": p99_lag, "errors": errors, "refusals": refusals,
            "valid": not load_problems(len(self.results), answered, p99_lag, len(ok)),
        }  # fmt: skip


def _pct(values: Sequence[float]) -> dict[str, float]:
    v = np.asarray([x for x in values if math.isfinite(x)], dtype=np.float64)
    if not v.size:
        return {}
    return {f"p{q:g}": float(np.percentile(v, q)) for q in (50, 90, 95, 99)} | {"mean": float(v.mean())}


class _Cut(Exception):
    """A reply that did not end as a complete answer; its message is the cause counted in ``errors``."""


async def _one(
    host: str, port: int, path: str, body: bytes, want: int, intended: float, t0: float, timeout_s: float,
    auth: str = "",
) -> GenResult:  # fmt: skip
    """Send one request at its intended time and read its reply: answered only when the stream ends with its
    ``done`` event, ``want`` tokens and the chunked body's last chunk (a server stopping mid-way, or its error
    event, counts as an error with that cause)."""
    delay = t0 + intended - time.perf_counter()
    if delay > 0:
        await asyncio.sleep(delay)
    sent = time.perf_counter() - t0
    first = last = math.nan
    tokens = status = 0
    detail = ""
    try:
        async with asyncio.timeout(timeout_s):
            reader, writer = await asyncio.open_connection(host, port)
            head = (f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n{auth}"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()  # fmt: skip
            writer.write(head + body)
            await writer.drain()
            sent = time.perf_counter() - t0
            status_line = (await reader.readline()).split()
            if len(status_line) < 2 or not status_line[0].startswith(b"HTTP/") or not status_line[1].isdigit():
                raise _Cut("no HTTP status line (not an HTTP server?)")
            status = int(status_line[1])
            chunked = False
            while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
                chunked |= line.lower().startswith(b"transfer-encoding:") and b"chunked" in line.lower()
            if status == 200 and chunked:
                done: int | None = None
                while True:
                    size_line = await reader.readline()
                    if not size_line:
                        raise _Cut("the stream was cut before its end")
                    size = int(size_line.split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        break
                    data = await reader.readexactly(size + 2)
                    now = time.perf_counter() - t0
                    for event in data.split(b"\n"):
                        if not event.startswith(b"data: "):
                            continue
                        if n := event.count(b'"t"'):
                            tokens += n
                            first = now if tokens == n else first
                            last = now
                        elif b'"error"' in event:
                            why = str(_event(event).get("error", ""))[:120]
                            raise _Cut(f"the stream ended with the server's error: {why}")
                        elif b'"done"' in event:
                            done = int(_event(event).get("tokens", -1))
                if done is None:
                    raise _Cut("the stream ended without its done event")
                if tokens != want or done != want:
                    raise _Cut("the stream held fewer or more tokens than asked for")
            elif status != 200:  # a refusal: keep its reason (Connection: close, so the body ends the reply)
                detail = _detail(await reader.read(4096))
            writer.close()
    except _Cut as exc:
        return GenResult(intended, sent, first, last, tokens, 0, f"{exc} (HTTP {status or '-'})")
    except OSError as exc:  # refused, reset, too many open files: the errno's words tell them apart
        cause = f"{type(exc).__name__}: {exc.strerror}" if exc.strerror else type(exc).__name__
        return GenResult(intended, sent, first, last, tokens, 0, f"{cause} (HTTP {status or '-'})")
    except (TimeoutError, asyncio.IncompleteReadError, ValueError) as exc:
        return GenResult(intended, sent, first, last, tokens, 0, f"{type(exc).__name__} (HTTP {status or '-'})")
    return GenResult(intended, sent, first, last, tokens, status, detail=detail)


def _event(line: bytes) -> dict[str, Any]:
    """A server-sent ``data: {...}`` line's object ({} when it holds another JSON value)."""
    got = json.loads(line[6:])
    return got if isinstance(got, dict) else {}


def _detail(body: bytes) -> str:
    """The reason in a refusal's body: FastAPI's ``{"detail": ...}``, else its text (one line, 300 characters)."""
    text = body.decode("utf-8", "replace").strip()
    try:
        got = json.loads(text)
        text = str(got.get("detail", text)) if isinstance(got, dict) else text
    except ValueError:
        pass
    return " ".join(text.split())[:300]


def run_generation_load(
    url: str,
    offsets_s: Sequence[float] | np.ndarray,
    prompts: Sequence[int] | np.ndarray,
    outputs: Sequence[int] | np.ndarray,
    *,
    timeout_s: float = 300.0,
    seed: int = 0,
    token: str | None = None,
) -> GenLoadResult:
    """Send request i at ``offsets_s[i]`` with ``prompts[i]`` random prompt tokens (the server draws them,
    seeded per request) and ``outputs[i]`` new tokens; wait for every reply (bounded by ``timeout_s`` each).
    ``token``: sent as ``Authorization: Bearer`` (a server started with ``--token``)."""
    header = bearer_header(token)
    auth = f"{header[0]}: {header[1]}\r\n" if header else ""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    path = parts.path.rstrip("/")
    path = path if path.endswith("/v1/generate") else path + "/v1/generate"  # the server's URL or the endpoint's
    bodies = [json.dumps({"prompt_len": int(p), "max_new_tokens": int(o), "stream": True, "seed": seed + i}).encode()
              for i, (p, o) in enumerate(zip(prompts, outputs, strict=True))]  # fmt: skip

    async def main() -> GenLoadResult:
        t0 = time.perf_counter() + 0.05
        tasks = [asyncio.create_task(_one(host, port, path, b, int(o), float(t), t0, timeout_s, auth))
                 for b, o, t in zip(bodies, outputs, offsets_s, strict=True)]  # fmt: skip
        results = list(await asyncio.gather(*tasks))
        return GenLoadResult(results, time.perf_counter() - t0)

    return asyncio.run(main())
