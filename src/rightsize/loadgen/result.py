"""Outcomes of one load run: HdrHistogram recorders while running, a ``LoadResult`` after.

Histograms hold integer microseconds from 1 µs to 1 h at 3 significant digits (HdrHistogram,
docs/sources.md `load-generation`), so percentiles carry at most 0.1% quantisation error and runs can be merged.
"""

from __future__ import annotations

import array
import collections
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np
from hdrh.histogram import HdrHistogram

from rightsize.profile import Latency

__all__ = ["ERROR_KINDS", "LoadResult", "Recorder", "error_kind", "histogram_of", "latency_of", "latency_of_histogram"]

# Error kinds a run counts separately: backpressure (503), deadline (504), other HTTP errors,
# client-side timeouts and connection failures (refused, reset, closed mid-response).
ERROR_KINDS = ("http_503", "http_504", "http_4xx", "http_5xx", "timeout", "connection")

_HIST_MAX_US = 3_600_000_000  # 1 hour
PERCENTILES = (("p50", 50.0), ("p90", 90.0), ("p95", 95.0), ("p99", 99.0), ("p99_9", 99.9))


def error_kind(status: int) -> str | None:
    """The ``ERROR_KINDS`` bucket of an HTTP status, or None for 1xx-3xx."""
    if status < 400:
        return None
    if status == 503:
        return "http_503"
    if status == 504:
        return "http_504"
    return "http_4xx" if status < 500 else "http_5xx"


def new_histogram() -> HdrHistogram:
    return HdrHistogram(1, _HIST_MAX_US, 3)


def histogram_of(values_s: array.array[float] | list[float]) -> HdrHistogram:
    """An HdrHistogram of durations in seconds (recorded as µs, clamped to 1 µs..1 h).

    Recording value by value costs ~5 µs each in pure Python, too much for the hot loop, so runs
    keep raw arrays and build the histogram once: values are first rounded down to their
    HdrHistogram bucket (2048 sub-buckets per power of two for 3 significant digits), then each
    distinct bucket is recorded with its count.
    """
    hist = new_histogram()
    if len(values_s) == 0:
        return hist
    us = np.clip((np.asarray(values_s, dtype=np.float64) * 1e6).astype(np.int64), 1, _HIST_MAX_US)
    shift = np.maximum(np.floor(np.log2(us)).astype(np.int64) - 10, 0)  # 2^11 = 2048 sub-buckets
    lowest = (us >> shift) << shift
    vals, counts = np.unique(lowest, return_counts=True)
    for v, c in zip(vals.tolist(), counts.tolist(), strict=True):
        hist.record_value(v, c)
    return hist


def latency_of(values_s: array.array[float] | list[float]) -> Latency | None:
    """Latency summary of durations in seconds via an HdrHistogram (see ``histogram_of``)."""
    return latency_of_histogram(histogram_of(values_s), float(np.mean(values_s)) * 1000.0 if len(values_s) else 0.0)


def latency_of_histogram(hist: HdrHistogram, mean_ms: float) -> Latency | None:
    """Latency summary of a µs histogram (one pass; ``mean_ms`` from the raw values, exact and cheaper)."""
    n = int(hist.get_total_count())
    if n == 0:
        return None
    by_p = hist.get_percentile_to_value_dict([p for _, p in PERCENTILES])
    vals = {name: by_p[p] / 1000.0 for name, p in PERCENTILES}
    return Latency(**vals, max=hist.get_max_value() / 1000.0, mean=mean_ms, n=n)


class Recorder:
    """Mutable tallies of a run; only requests inside the measurement window are recorded.

    Durations are appended to raw arrays (seconds) in the hot loop and turned into histograms
    by ``histograms()`` after the run.
    """

    def __init__(self, slo_ms: float | None) -> None:
        self.slo_s = math.inf if slo_ms is None else slo_ms / 1000.0
        self.latency_s = array.array("d")  # successful (< 400) responses
        self.send_lag_s = array.array("d")  # generator lateness behind the schedule (open loop)
        self.connection_wait_s = array.array("d")  # waiting for a free pooled connection (open loop)
        self.errors: collections.Counter[str] = collections.Counter()
        self.status: collections.Counter[int] = collections.Counter()
        self.sent = 0
        self.ok = 0
        self.ok_within_slo = 0

    def response(self, status: int, latency_s: float) -> None:
        self.status[status] += 1
        if status >= 400:
            self.errors[error_kind(status) or "http_5xx"] += 1
            return
        self.ok += 1
        self.latency_s.append(latency_s)
        if latency_s <= self.slo_s:
            self.ok_within_slo += 1

    @property
    def answered(self) -> int:
        """Requests that got any HTTP answer (2xx-5xx)."""
        return sum(self.status.values())

    def error(self, kind: str) -> None:
        self.errors[kind] += 1

    def latency(self) -> tuple[Latency | None, str]:
        """Latency percentiles of successful responses and their base64 HdrHistogram (µs)."""
        hist = histogram_of(self.latency_s)
        mean_ms = float(np.mean(self.latency_s)) * 1000.0 if self.ok else 0.0
        return latency_of_histogram(hist, mean_ms), hist.encode().decode("ascii") if self.ok else ""


BAD_REQUEST_LIMIT = 0.5  # a run where most answers are 4xx measured a wrong request, not the server
GENERATOR_BEHIND = "generator fell behind"  # how a run invalid for the generator's own lag starts its problem


def client_error_problem(status: Mapping[Any, int]) -> str | None:
    """Why a run is invalid when most of its answers are HTTP 4xx (the request is wrong), else None.
    503s are the server refusing load (an overload result, still valid); 4xx say the body or path is bad."""
    total = sum(status.values())
    bad = sum(n for code, n in status.items() if 400 <= int(code) < 500 and int(code) not in SHED)
    if total and bad / total > BAD_REQUEST_LIMIT:
        codes = ", ".join(
            f"{c} x{n}"
            for c, n in sorted(status.items(), key=lambda kv: int(kv[0]))
            if 400 <= int(c) < 500 and int(c) not in SHED
        )
        if sum(n for code, n in status.items() if int(code) in (401, 403)) / bad > 0.5:  # a token, not the body
            return (f"{bad / total:.0%} of answers were client errors ({codes}): the server wants a bearer token; "
                    "pass --token (or set RIGHTSIZE_TOKEN), or check the one given")  # fmt: skip
        return (
            f"{bad / total:.0%} of answers were client errors ({codes}): the request does not fit this server "
            "(rightsize servers describe a valid one at /v1/info; Target.from_url reads it)"
        )
    return None


SERVER_ERROR_LIMIT = 0.05  # a run where the server failed more than this many answers (5xx but 503/504) is no latency
# the server refusing load (503 admission, 429 rate limit) or dropping a request past its deadline (504): overload,
# not failure
SHED = (503, 504, 429)


def server_error_problem(status: Mapping[Any, int]) -> str | None:
    """Why a run is invalid when more than 5% of its answers were server failures (HTTP 5xx other than 503 and 504):
    the percentiles are then of the few answers that worked (a server failing 90% of requests read VALID, p95 45 ms)."""
    total = sum(status.values())
    failed = {int(c): n for c, n in status.items() if 500 <= int(c) < 600 and int(c) not in SHED}
    if total and sum(failed.values()) / total > SERVER_ERROR_LIMIT:
        codes = ", ".join(f"{c} x{n}" for c, n in sorted(failed.items()))
        return (f"{sum(failed.values()) / total:.0%} of answers were server errors ({codes}): the server failed, and "
                "the latency of its few good answers is not its latency")  # fmt: skip
    return None


REFUSED_NOTE = 0.01  # 503s and 504s past this share of the answers are said out loud
SHED_LIMIT = 0.5  # past this share shed, the percentiles are of a few admitted requests: no latency of the load


def _shed(status: Mapping[Any, int]) -> tuple[float, dict[int, int]]:
    """The share of the answers the server shed (503 refused, 504 dropped past its deadline) and their counts."""
    total = sum(status.values())
    shed = {int(c): n for c, n in status.items() if int(c) in SHED}
    return (sum(shed.values()) / total if total else 0.0), shed


def shed_problem(status: Mapping[Any, int], closed: bool = False) -> str | None:
    """Why a run is invalid when the server shed most of it (503 refused, 504 dropped past its deadline): 95% refused
    with p95 over the 5 admitted read VALID. ``closed``: a closed-loop run, whose load is its users (it has no
    --rate to lower)."""
    share, shed = _shed(status)
    if share > SHED_LIMIT:
        codes = ", ".join(f"{c} x{n}" for c, n in sorted(shed.items()))
        fix = "lower --concurrency" if closed else "lower --rate (--find-knee finds what it admits)"
        return (
            f"the server shed {share:.0%} of requests ({codes}): the percentiles would be of the few it served; {fix}"
        )
    return None


def refused_warning(status: Mapping[Any, int]) -> str | None:
    """A note when the server shed more than 1% of the answers (503: admission refused it; 504: its deadline passed
    in the queue): an overload result, valid, whose percentiles are those of the requests it served."""
    share, shed = _shed(status)
    if share > REFUSED_NOTE:
        codes = "/".join(str(c) for c in sorted(shed))
        return (f"the server refused {share:.0%} of requests ({codes}): the offered load is past what it admits; the "
                "percentiles are of the requests it served")  # fmt: skip
    return None


def answer_checks(rec: Recorder, closed: bool = False) -> tuple[list[str], list[str]]:
    """(problems, warnings) from what the server answered, one rule for open and closed loop: mostly 4xx, server
    failures, too few answers, or no success at all make a run invalid; many 503s are said."""
    problems = [p for p in (client_error_problem(rec.status), server_error_problem(rec.status),
                            shed_problem(rec.status, closed), unanswered_problem(rec.sent, rec.status, rec.errors))
                if p is not None]  # fmt: skip
    if rec.sent and rec.ok == 0 and not problems:
        problems.append("no successful response: nothing to measure")
    answered = rec.answered
    if answered and rec.ok / answered < 0.5 and not problems:  # several kinds, each under its own limit
        codes = ", ".join(f"{c} x{n}" for c, n in sorted(rec.status.items(), key=lambda kv: int(kv[0]))
                          if int(c) >= 400)  # fmt: skip
        problems.append(f"only {rec.ok / answered:.0%} of answers succeeded ({codes}): the percentiles would be of "
                        "the few that did")  # fmt: skip
    warnings = [w for w in (refused_warning(rec.status),) if w is not None and not problems]
    return problems, warnings


MIN_ANSWERED = 0.95  # a run where requests went unanswered measured the generator's timeouts, not latency


def unanswered_problem(sent: int, status: Mapping[Any, int], errors: Mapping[str, int]) -> str | None:
    """Why a run is invalid when fewer than 95% of the requests it sent got any HTTP answer, else None."""
    answered = sum(status.values())
    if sent and answered / sent < MIN_ANSWERED:
        transport = ", ".join(f"{k} x{n}" for k, n in sorted(errors.items()) if not k.startswith("http_"))
        return (
            f"only {answered} of {sent} requests sent were answered ({answered / sent:.0%}; {transport or 'no reply'})"
            ": the latency of the rest is unknown"
        )
    return None


@dataclass(frozen=True)
class LoadResult:
    """One bounded load run. Rates are per second over the measurement window ``duration_s``.

    ``requests_sent`` counts requests written to a socket (not merely scheduled or queued for a connection),
    ``requests_answered`` those that got any HTTP answer; ``achieved_rate_per_s`` is the sent rate;
    ``throughput_per_s`` successful
    responses; ``goodput_per_s`` successful responses within ``slo_ms``. Latency percentiles are
    over successful responses; open-loop latency runs from the intended send time.
    """

    mode: Literal["open", "closed"]
    coordinated_omission: Literal["corrected", "affected"]
    url: str
    duration_s: float
    requests_sent: int
    responses_ok: int
    achieved_rate_per_s: float
    throughput_per_s: float
    latency_ms: Latency | None
    errors: dict[str, int]
    status_counts: dict[str, int]
    valid: bool
    problems: list[str] = field(default_factory=list)  # why the run is invalid
    warnings: list[str] = field(default_factory=list)
    arrival: str | None = None
    offered_rate_per_s: float | None = None
    scheduled_rate_per_s: float | None = None  # the drawn schedule's own rate (Poisson varies)
    concurrency: int | None = None
    connections: int | None = None  # max pool size (open) or users (closed)
    connections_peak: int | None = None
    slo_ms: float | None = None
    goodput_per_s: float | None = None
    send_lag_ms: Latency | None = None
    connection_wait_ms: Latency | None = None
    latency_hdr: str = ""  # base64 HdrHistogram of latency in µs, mergeable across runs
    requests_answered: int = 0  # got any HTTP answer
    # Open loop: time.perf_counter() at the schedule's time 0. On Linux that is CLOCK_MONOTONIC, one clock for
    # every process of the machine, so a server's batch log and other generators' schedules line up with it.
    schedule_start_s: float | None = None

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())

    @property
    def error_fraction(self) -> float:
        total = self.responses_ok + self.error_count
        return self.error_count / total if total else 1.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for key in ("latency_ms", "send_lag_ms", "connection_wait_ms"):
            lat = getattr(self, key)
            d[key] = lat.to_dict() if lat is not None else None
        d["error_fraction"] = self.error_fraction
        return d

    def render(self) -> str:
        """A few aligned lines for a terminal."""
        head = f"{self.mode}-loop load on {self.url}: {self.duration_s:.1f} s"
        if self.mode == "open":
            head += f", {self.arrival} arrivals, offered {self.offered_rate_per_s:.1f}/s"
        else:
            head += f", {self.concurrency} concurrent users"
        lines = [head]
        if self.coordinated_omission == "affected":
            lines.append("  NOTE: closed loop is coordinated-omission-affected: tail latency is under-reported")
        share = self.requests_answered / self.requests_sent if self.requests_sent else 0.0
        lines.append(
            f"  sent (written) {self.requests_sent} ({self.achieved_rate_per_s:.1f}/s)   answered "
            f"{self.requests_answered} ({share:.0%})   ok {self.responses_ok} ({self.throughput_per_s:.1f}/s)   "
            f"errors {self.error_count} ({self.error_fraction:.1%})"
        )
        if self.goodput_per_s is not None:
            lines.append(f"  goodput within {self.slo_ms:g} ms: {self.goodput_per_s:.1f}/s")
        if self.latency_ms is not None:
            p = self.latency_ms
            lines.append(
                f"  latency ms  p50 {p.p50:.2f}  p90 {p.p90 or 0:.2f}  p95 {p.p95:.2f}  p99 {p.p99:.2f}  "
                f"p99.9 {p.p99_9 or 0:.2f}  max {p.max or 0:.2f}"
            )
        if self.send_lag_ms is not None:
            lag = self.send_lag_ms
            lines.append(f"  send lag ms  p50 {lag.p50:.2f}  p99 {lag.p99:.2f}  max {lag.max or 0:.2f}")
        if self.errors:
            lines.append("  errors: " + ", ".join(f"{k} {v}" for k, v in sorted(self.errors.items())))
        lines += [f"  warning: {w}" for w in self.warnings]
        lines.append("  VALID" if self.valid else "  INVALID: " + "; ".join(self.problems))
        return "\n".join(lines)
