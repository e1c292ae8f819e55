"""Open-loop runs against a real server on 127.0.0.1: rate accuracy, coordinated omission, errors, validity."""

from __future__ import annotations

import asyncio
import time

import pytest
from lg_tiny_server import TinyServer, until_valid

from rightsize.loadgen import (
    Arrival,
    ClosedLoopConfig,
    LoadResult,
    OpenLoopConfig,
    Target,
    open_loop,
    run_closed_loop,
    run_open_loop,
)

# This machine is shared with other jobs: tests that are not about generator lag allow more of it.
LOOSE_LAG_MS = 60.0


@pytest.mark.slow  # 2 s each: in `make test`, not `make test-fast`
@pytest.mark.parametrize("arrival", ["constant", "poisson"])
def test_achieved_rate_matches_offered(server: TinyServer, arrival: Arrival) -> None:
    cfg = OpenLoopConfig(rate_per_s=250, duration_s=2.0, arrival=arrival, max_lag_ms=LOOSE_LAG_MS)

    def run() -> LoadResult:
        server.reset()
        return run_open_loop(Target.from_url(server.url("/work/2")), cfg)

    r = until_valid(run)
    assert r.requests_sent == 500 == r.responses_ok == server.requests
    assert r.scheduled_rate_per_s == pytest.approx(250, rel=1e-6)
    assert r.achieved_rate_per_s == pytest.approx(250, rel=0.03)
    assert r.throughput_per_s == pytest.approx(250, rel=0.05)
    assert r.latency_ms is not None and 2.0 <= r.latency_ms.p50 < 30.0
    assert r.coordinated_omission == "corrected" and r.mode == "open"


@pytest.mark.slow
def test_a_stall_shows_in_the_open_loop_tail_but_hides_from_the_closed_loop(
    server: TinyServer,
) -> None:
    """Coordinated omission (docs/sources.md `load-generation`): one 200 ms server stall in a 3 s run."""
    target = Target.from_url(server.url("/work/2"))

    server.stall(start_in_s=1.0, stall_ms=200)
    opened = run_open_loop(
        target, OpenLoopConfig(rate_per_s=100, duration_s=3.0, arrival="constant", max_lag_ms=LOOSE_LAG_MS)
    )
    server.stall(start_in_s=1.0, stall_ms=200)
    closed = run_closed_loop(target, ClosedLoopConfig(concurrency=1, duration_s=3.0))

    assert opened.latency_ms is not None and closed.latency_ms is not None
    # Open loop: ~20 of 300 requests were due during the stall (6.7%) and count their wait from
    # their intended send time, so p99 reaches into the stall.
    assert opened.latency_ms.p99 > 100.0
    assert opened.latency_ms.max > 180.0
    # Closed loop: the single user waited once; the requests it did not send were never measured.
    assert closed.latency_ms.max > 180.0  # the stall did happen to it …
    assert closed.latency_ms.p99 < 50.0  # … but the tail hides it
    assert opened.latency_ms.p99 > 3 * closed.latency_ms.p99
    assert closed.coordinated_omission == "affected"


def test_errors_are_classified(server: TinyServer, closed_port: int) -> None:
    base = server.url("")
    cfg = OpenLoopConfig(rate_per_s=200, requests=10, arrival="constant", timeout_s=0.2, max_lag_ms=LOOSE_LAG_MS)
    cases = {
        "/status/503": {"http_503": 10},
        "/status/504": {"http_504": 10},
        "/status/404": {"http_4xx": 10},
        "/status/500": {"http_5xx": 10},
        "/drop": {"connection": 10},
        "/work/400": {"timeout": 10},  # 400 ms > the 200 ms timeout
    }
    for path, expected in cases.items():
        r = run_open_loop(Target.from_url(base + path, method="GET"), cfg)
        assert r.errors == expected, path
        assert r.responses_ok == 0 and r.latency_ms is None and r.error_fraction == 1.0
    refused = run_open_loop(Target.from_url(f"http://127.0.0.1:{closed_port}/x"), cfg)
    assert refused.errors == {"connection": 10}
    shed = run_open_loop(Target.from_url(base + "/status/503"), cfg)
    assert shed.status_counts == {"503": 10}
    # nothing succeeded: invalid, not a VALID run of no latency; server failures say so, the 503s named as shed load
    assert not shed.valid and any(p.startswith("the server shed 100% of requests (503 x10)") for p in shed.problems)
    failed = run_open_loop(Target.from_url(base + "/status/500", method="GET"), cfg)
    assert not failed.valid
    assert any(p.startswith("100% of answers were server errors (500 x10)") for p in failed.problems)


def _answered(counts: dict[int, int]) -> object:
    """A Recorder that sent one request per answer and got ``counts`` of each status."""
    from rightsize.loadgen.result import Recorder

    rec = Recorder(None)
    rec.sent = sum(counts.values())
    for status, n in counts.items():
        for _ in range(n):
            rec.response(status, 0.01)
    return rec


def test_a_server_failing_most_requests_is_no_latency_measurement() -> None:
    """A server answering 500 to 9 requests in 10 read VALID with the p95 of its one good answer in 10."""
    from rightsize.loadgen.result import Recorder, answer_checks

    rec = Recorder(None)
    rec.sent = 40
    for k in range(40):
        rec.response(200 if k % 10 == 0 else 500, 0.01)
    problems, _ = answer_checks(rec)
    assert problems == ["90% of answers were server errors (500 x36): the server failed, and the latency of its few "
                        "good answers is not its latency"]  # fmt: skip
    ok = Recorder(None)
    ok.sent = 100
    for k in range(100):
        ok.response(503 if k < 3 else 200, 0.01)  # 3% shed by admission: valid, and said
    problems, warnings = answer_checks(ok)
    assert problems == [] and warnings[0].startswith("the server refused 3% of requests (503)")
    late = Recorder(None)
    late.sent = 100
    for k in range(100):
        late.response(504 if k < 20 else 200, 0.01)  # past their deadline in the queue: overload, not failure
    problems, warnings = answer_checks(late)
    assert problems == [] and warnings[0].startswith("the server refused 20% of requests (504)")
    # read VALID, with a p95 over the 5 it admitted
    problems, warnings = answer_checks(_answered({503: 95, 200: 5}))
    assert problems == ["the server shed 95% of requests (503 x95): the percentiles would be of the few it served; "
                        "lower --rate (--find-knee finds what it admits)"] and warnings == []  # fmt: skip
    problems, _ = answer_checks(_answered({503: 95, 200: 5}), closed=True)  # a closed loop has no --rate to lower
    assert problems[0].endswith("served; lower --concurrency")
    # 45% refused, 45% rate-limited: neither alone past its limit, VALID over 10 answers
    problems, _ = answer_checks(_answered({503: 45, 429: 45, 200: 10}))
    assert problems == ["the server shed 90% of requests (429 x45, 503 x45): the percentiles would be of the few it "
                        "served; lower --rate (--find-knee finds what it admits)"]  # fmt: skip
    problems, _ = answer_checks(_answered({503: 45, 404: 45, 200: 10}))
    assert problems == ["only 10% of answers succeeded (404 x45, 503 x45): the percentiles would be of the few that "
                        "did"]  # fmt: skip
    # the fix was "the request does not fit this server (... /v1/info ...)"
    problems, _ = answer_checks(_answered({401: 10}))
    assert problems[0].endswith(
        "the server wants a bearer token; pass --token (or set RIGHTSIZE_TOKEN), or check the one given"
    )


@pytest.mark.slow  # ~2 s: in `make test`, not `make test-fast`
def test_goodput_counts_only_responses_within_the_slo(server: TinyServer) -> None:
    target = Target.from_url(server.url("/work/20"))
    base = OpenLoopConfig(rate_per_s=100, duration_s=1.0, arrival="constant", max_lag_ms=LOOSE_LAG_MS)
    lenient = run_open_loop(target, OpenLoopConfig(**{**base.__dict__, "slo_ms": 500.0}))
    strict = run_open_loop(target, OpenLoopConfig(**{**base.__dict__, "slo_ms": 5.0}))
    assert lenient.goodput_per_s == pytest.approx(lenient.throughput_per_s)
    assert strict.goodput_per_s == 0.0  # every answer takes >= 20 ms


@pytest.mark.slow  # ~1 s on 2 cores: kept out of make test-fast
def test_a_starved_generator_flags_the_run_invalid(server: TinyServer) -> None:
    """Block the generator's event loop for 150 ms mid-run, as a CPU-starved client would be."""
    target = Target.from_url(server.url("/work/1"))

    async def starved() -> LoadResult:
        async def hog() -> None:
            await asyncio.sleep(0.4)
            time.sleep(0.15)  # holds the loop: no send can go out

        task = asyncio.create_task(hog())
        result = await open_loop(target, OpenLoopConfig(rate_per_s=200, duration_s=1.0, arrival="constant"))
        await task
        return result

    r = asyncio.run(starved())
    assert not r.valid
    assert any("fell behind" in p for p in r.problems)
    assert r.send_lag_ms is not None and r.send_lag_ms.p99 > 50.0


@pytest.mark.slow  # ~1 s on 2 cores: kept out of make test-fast
def test_warmup_requests_are_sent_but_not_recorded(server: TinyServer) -> None:
    cfg = OpenLoopConfig(rate_per_s=200, duration_s=1.0, warmup_s=0.5, arrival="constant", max_lag_ms=LOOSE_LAG_MS)

    def run() -> LoadResult:
        server.reset()
        return run_open_loop(Target.from_url(server.url("/work/0")), cfg)

    before = time.perf_counter()
    r = until_valid(run)
    assert server.requests == 200
    assert r.requests_sent == 100 and r.duration_s == pytest.approx(0.5, rel=0.01)
    assert r.achieved_rate_per_s == pytest.approx(200, rel=0.05)
    # The schedule's time 0 on perf_counter (one clock for every process on Linux): the run started after
    # `before` and its last send (1 s of schedule) came before now.
    assert r.schedule_start_s is not None and before < r.schedule_start_s < time.perf_counter() - 0.9


def test_closed_loop_request_budget(server: TinyServer) -> None:
    r = run_closed_loop(Target.from_url(server.url("/work/1")), ClosedLoopConfig(concurrency=5, requests=123))
    assert r.requests_sent == r.responses_ok == server.requests == 123
    assert r.concurrency == 5 and r.valid


def test_a_connection_limit_queues_in_the_client_and_counts_the_wait(server: TinyServer) -> None:
    # One connection, 20 ms per answer, 100/s offered: capacity 50/s, so requests queue client-side.
    target = Target.from_url(server.url("/work/20"))
    cfg = OpenLoopConfig(rate_per_s=100, requests=30, arrival="constant", connections=1, max_lag_ms=LOOSE_LAG_MS)
    r = run_open_loop(target, cfg)
    assert r.responses_ok == 30 and r.connections_peak == 1 and r.requests_sent == r.requests_answered == 30
    assert r.connection_wait_ms is not None and r.connection_wait_ms.max > 100
    assert r.latency_ms is not None and r.latency_ms.max > 250  # the 30th waited for ~29 × 20 ms - 290 ms
    assert any("connections were busy" in w for w in r.warnings)


def test_queued_requests_time_out_too(server: TinyServer) -> None:
    target = Target.from_url(server.url("/work/300"))
    cfg = OpenLoopConfig(
        rate_per_s=100, requests=10, arrival="constant", connections=1, timeout_s=0.2, max_lag_ms=LOOSE_LAG_MS
    )
    r = run_open_loop(target, cfg)
    assert r.errors == {"timeout": 10}  # the first on its connection, the rest while queued
    # a request that expired in the queue was never written to a socket: scheduled, not sent
    assert 1 <= r.requests_sent < 10 and r.requests_answered == 0 and not r.valid
    assert any(p.startswith("the server kept all 1 connections busy, so only ") for p in r.problems)
    assert f"sent (written) {r.requests_sent} " in r.render()


def test_a_server_that_went_away_is_named_not_only_the_send_rate(closed_port: int) -> None:
    """A server stopped mid-run read "INVALID: achieved send rate 27.8/s < 95% of scheduled 100.0/s" alone, beside
    289 connection errors, and errors above sent with no word on why."""
    target = Target.from_url(f"http://127.0.0.1:{closed_port}/work/0", body=b"{}")
    r = run_open_loop(target, OpenLoopConfig(rate_per_s=50, requests=10, arrival="constant", max_lag_ms=LOOSE_LAG_MS))
    assert r.requests_sent == 0 and r.errors == {"connection": 10} and not r.valid
    [p] = [p for p in r.problems if p.startswith("achieved send rate")]
    assert p.endswith(": 10 connection errors (refused, reset or closed: the server stopped or turned connections "
                      "away); a request never written counts under errors, not under sent")  # fmt: skip


def test_a_generator_short_of_cpu_is_named_not_only_the_server() -> None:
    """The send lag sees only the dispatch; a generator whose thread used a whole core also reads answers late, and
    its latencies then include its own queueing: the run says so."""
    from rightsize.loadgen.openloop import generator_busy_warning

    assert generator_busy_warning(1.0, 7.0) is None  # 15% of a core: the 5,000/s run on the 2-vCPU VM
    line = generator_busy_warning(4.8, 5.0)
    assert line is not None and line.startswith("the load generator was CPU-bound (96% of a core over the run)")
    assert generator_busy_warning(0.0, 0.0) is None


def test_a_send_rate_held_back_by_busy_connections_names_the_server(server: TinyServer) -> None:
    """A server capped at 100/s, offered 150/s: "INVALID: achieved send rate 120.4/s < 95% of scheduled 150.0/s"
    read as the generator's fault beside "all 128 connections were busy"; the server could not keep up."""
    target = Target.from_url(server.url("/serial/10"))  # one at a time, 10 ms each: 100/s
    cfg = OpenLoopConfig(rate_per_s=200, requests=60, arrival="constant", connections=4, max_lag_ms=LOOSE_LAG_MS)
    r = run_open_loop(target, cfg)
    assert r.requests_sent == r.responses_ok == 60 and r.connections_peak == 4 and not r.valid
    assert r.scheduled_rate_per_s is not None and r.achieved_rate_per_s < 0.95 * r.scheduled_rate_per_s
    head = (f"the server kept all 4 connections busy, so only {r.achieved_rate_per_s:.1f}/s of the scheduled "
            f"{r.scheduled_rate_per_s:.1f}/s could be sent: it is past capacity at this rate (ok "
            f"{r.throughput_per_s:.1f}/s; if it serves more than 4 requests at once, raise --connections)")  # fmt: skip
    assert head in r.problems and r.throughput_per_s < 110
    assert not any("fell behind" in p or "achieved send rate" in p for p in r.problems)
    assert f"INVALID: {head}" in r.render()


def test_a_send_rate_short_with_connections_free_is_the_generators() -> None:
    """With connections free nothing but the generator held the sends back: its own wording, which the knee
    search reads as generator-limited."""
    from types import SimpleNamespace

    from rightsize.loadgen.knee import _generator_behind
    from rightsize.loadgen.openloop import _send_rate_problem
    from rightsize.loadgen.result import Recorder

    cfg = OpenLoopConfig(rate_per_s=150, connections=128)
    pool = SimpleNamespace(peak_open=12)
    why = _send_rate_problem(cfg, Recorder(None), pool, 120.4, 150.0, 118.0)  # type: ignore[arg-type]
    assert why == ("generator fell behind with connections free: achieved send rate 120.4/s < 95% of scheduled "
                   "150.0/s (lower --rate, or give the generator a free core)")  # fmt: skip
    result = SimpleNamespace(problems=[why])
    assert _generator_behind(result)  # type: ignore[arg-type]
    busy = _send_rate_problem(cfg, Recorder(None), SimpleNamespace(peak_open=128), 120.4, 150.0, 94.8)  # type: ignore[arg-type]
    assert busy == ("the server kept all 128 connections busy, so only 120.4/s of the scheduled 150.0/s could be "
                    "sent: it is past capacity at this rate (ok 94.8/s; if it serves more than 128 requests at once, "
                    "raise --connections)")  # fmt: skip
