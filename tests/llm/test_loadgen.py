"""The open-loop SSE client against the real generation server (tiny decoder): counts, times, failures."""

from __future__ import annotations

import math
import socket

import numpy as np
import pytest

from rightsize.llm.engine import EngineConfig
from rightsize.llm.loadgen import run_generation_load
from rightsize.llm.server import running_generate_server


def test_every_request_streams_its_tokens_and_the_client_times_them() -> None:
    cfg = EngineConfig(model="gpt2", size="tiny", max_seqs=4, kv_tokens=1024)
    with running_generate_server(cfg) as url:
        offsets = np.linspace(0.0, 0.5, 8)
        res = run_generation_load(url, offsets, [8, 16, 24, 32] * 2, [5, 3, 9, 2] * 2)
    s = res.summary()
    assert s["sent"] == s["answered"] == 8 and s["statuses"] == {"200": 8} and s["valid"]
    assert [r.tokens for r in res.results] == [5, 3, 9, 2] * 2
    for r in res.results:
        assert r.sent_s >= r.intended_s - 1e-3  # never early
        assert 0 < r.ttft_ms < 10_000 and r.last_s >= r.first_s
        assert math.isfinite(r.tpot_ms) and r.tpot_ms >= 0
    assert s["ttft_ms"]["p50"] <= s["ttft_ms"]["p95"] and s["output_tokens_per_s"] > 0


def test_a_refused_connection_is_counted_not_raised() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again below: nothing listens there
    res = run_generation_load(f"http://127.0.0.1:{port}", [0.0, 0.01], [4, 4], [2, 2], timeout_s=5)
    s = res.summary()
    assert s["answered"] == 0 and s["statuses"] == {"0": 2} and not s["valid"]
    assert all("Error" in r.error for r in res.results)


def test_a_request_the_server_refuses_carries_its_reason_to_the_invalid_lines() -> None:
    """A prompt over the server's max_prompt_tokens is answered 413: the run says why, in the server's words (it
    printed "answered 0 {'413': 4}, INVALID" and nothing else)."""
    from rightsize.cli.loadtest import _invalid_reasons

    cfg = EngineConfig(model="gpt2", size="tiny", max_seqs=2, kv_tokens=1024, max_prompt_tokens=16)
    with running_generate_server(cfg) as url:
        res = run_generation_load(url, [0.0, 0.02], [40, 40], [2, 2])
    s = res.summary()
    assert s["statuses"] == {"413": 2} and not s["valid"]
    assert "max_prompt_tokens=16" in s["refusals"]["413"]
    assert any(w.startswith("2 requests answered 413: prompt_len: 40 is over") for w in _invalid_reasons(s, 10.0))


def test_a_prediction_servers_404_names_what_the_url_points_at() -> None:
    """loadtest --generate at `rightsize serve simplenet` read 'give the generation server's base URL', which the user
    had given: the server is the other kind."""
    from rightsize.cli.loadtest import _invalid_reasons

    summary = {"statuses": {"404": 3}, "refusals": {"404": "Not Found"}, "answered": 0, "send_lag_p99_ms": 1.0}
    assert _invalid_reasons(summary, 10.0) == [
        "3 requests answered 404: Not Found (no POST /v1/generate at this URL: a prediction server, `rightsize serve "
        "MODEL` without --generate, answers so; give a generation server's base URL, http://HOST:PORT)"]  # fmt: skip


@pytest.mark.slow  # > 1.2 s: make test runs it, make test-fast skips it
def test_a_token_server_answers_only_the_bearer_of_its_token(capsys: pytest.CaptureFixture[str]) -> None:
    import httpx

    from rightsize.cli.app import main
    from rightsize.errors import SpecError

    cfg = EngineConfig(model="gpt2", size="tiny", max_seqs=2, kv_tokens=1024)
    with running_generate_server(cfg, token="s3cret") as url:
        without = run_generation_load(url, [0.0], [8], [3]).summary()
        wrong = run_generation_load(url, [0.0], [8], [3], token="guess").summary()
        right = run_generation_load(url, [0.0, 0.05], [8, 8], [3, 3], token="s3cret")
        metrics = httpx.get(f"{url}/metrics")
        iterations = httpx.get(f"{url}/v1/iterations")
        authed = httpx.get(f"{url}/metrics", headers={"Authorization": "Bearer s3cret"})
        info = httpx.get(f"{url}/v1/info")
        with pytest.raises(SystemExit) as exc:  # the CLI without the token: refused, and says what to do
            main(["loadtest", url, "--generate", "--rate", "20", "--requests", "1", "--no-store"])
    assert without["statuses"] == {"401": 1} and wrong["statuses"] == {"401": 1}
    assert right.summary()["statuses"] == {"200": 2} and [r.tokens for r in right.results] == [3, 3]
    assert metrics.status_code == iterations.status_code == 401 and metrics.headers["www-authenticate"] == "Bearer"
    assert authed.status_code == 200 and 'rightsize_llm_requests_total{code="401"} 2' in authed.text
    assert info.status_code == 200  # settings stay open, as the prediction server's /v1/info
    cap = capsys.readouterr()
    assert exc.value.code == 1 and "answered 401: the server wants its bearer token; give it with --token" in cap.err
    assert "sent 1, answered 0 (1 x HTTP 401)," in cap.out  # had printed Python's dict: answered 0 {'401': 1}
    with pytest.raises(SpecError, match="one line"):
        run_generation_load(url, [0.0], [8], [3], token="a\r\nX-Injected: 1")


def test_an_invalid_run_says_why_timeouts_and_overload_apart() -> None:
    from rightsize.cli.loadtest import _invalid_reasons
    from rightsize.llm.loadgen import GenLoadResult, GenResult

    ok = [GenResult(0.1 * i, 0.1 * i, 0.1 * i + 0.05, 0.1 * i + 0.2, 8, 200) for i in range(5)]
    timed_out = [GenResult(1.0, 1.0, math.nan, math.nan, 0, 0, "TimeoutError (HTTP 200)") for _ in range(3)]
    full = [GenResult(1.2, 1.2, math.nan, math.nan, 0, 503)]
    summary = GenLoadResult(ok + timed_out + full, 2.0).summary()
    assert not summary["valid"] and summary["errors"] == {"TimeoutError (HTTP 200)": 3}
    assert summary["statuses"] == {"200": 5, "0": 3, "503": 1}
    why = _invalid_reasons(summary, 10.0)
    assert why[0].startswith("3 requests got no complete reply within --timeout-s 10 s")
    assert "raise --timeout-s" in why[0]
    assert why[1].startswith("1 requests answered 503") and len(why) == 2
    plain = GenLoadResult([GenResult(0.0, 0.0, math.nan, math.nan, 0, 200)] * 10, 1.0).summary()  # JSON, not SSE
    assert not plain["valid"] and _invalid_reasons(plain, 10.0) == [
        "10 requests answered 200 with no token stream: the URL is not a generation server (POST /v1/generate, "
        "server-sent events); point it at `rightsize serve MODEL --generate`"]  # fmt: skip


def test_a_warm_up_that_covers_every_request_is_invalid_and_says_so() -> None:
    """--requests 5 --warmup-s 30 printed VALID with no TTFT or TPOT line: every answered request was warm-up."""
    from rightsize.cli.loadtest import _invalid_reasons
    from rightsize.llm.loadgen import GenLoadResult, GenResult

    ok = [GenResult(0.1 * i, 0.1 * i, 0.1 * i + 0.05, 0.1 * i + 0.2, 8, 200) for i in range(5)]
    summary = GenLoadResult(ok, 1.0).summary(record_from_s=30.0)
    assert (summary["answered"], summary["recorded"], summary["valid"]) == (5, 0, False)
    assert summary["ttft_ms"] == {} and summary["tpot_ms"] == {}
    assert _invalid_reasons(summary, 10.0) == [
        "every answered request was intended within --warmup-s: nothing was recorded; shorten --warmup-s, or send "
        "for longer (--requests, --duration)"]  # fmt: skip
    assert GenLoadResult(ok, 1.0).summary(record_from_s=0.25)["recorded"] == 2  # intended at 0.3 and 0.4 s


def test_a_warm_up_past_the_schedule_of_requests_is_refused_before_sending(capsys: pytest.CaptureFixture[str]) -> None:
    from rightsize.cli.app import main

    with pytest.raises(SystemExit) as exc:
        main(["loadtest", "http://127.0.0.1:9", "--generate", "--rate", "5", "--requests", "5", "--warmup-s", "30"])
    assert exc.value.code == 2
    assert capsys.readouterr().err.strip() == (
        "error: --warmup-s: 30 s is past the ~1 s that 5 requests take at 5/s: nothing would be recorded; make it "
        "shorter, or send more with --requests"
    )


def _fake_sse_server(reply: bytes) -> tuple[socket.socket, int]:
    """A listening socket whose thread answers every connection with ``reply`` (raw bytes) and closes."""
    import threading

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)

    def serve() -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                conn.sendall(reply)

    threading.Thread(target=serve, daemon=True).start()
    return sock, sock.getsockname()[1]


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
_TOKENS = _chunk(b'data: {"t":5}\n\n') + _chunk(b'data: {"t":6}\n\n')


@pytest.mark.parametrize(
    ("reply", "cause"),
    [
        (_HEAD + _TOKENS, "the stream was cut before its end (HTTP 200)"),  # a server stopping mid-way
        (_HEAD + _TOKENS + _chunk(b'data: {"error":"the engine stopped"}\n\n') + b"0\r\n\r\n",
         "the stream ended with the server's error: the engine stopped (HTTP 200)"),
        (_HEAD + _TOKENS + b"0\r\n\r\n", "the stream ended without its done event (HTTP 200)"),
        (_HEAD + _TOKENS + _chunk(b'data: {"done":true,"tokens":2}\n\n') + b"0\r\n\r\n",
         "the stream held fewer or more tokens than asked for (HTTP 200)"),  # 2 of the 4 asked
        (b"garbage\r\n\r\n", "no HTTP status line (not an HTTP server?) (HTTP -)"),
    ],
)  # fmt: skip
def test_a_stream_that_does_not_end_as_a_whole_answer_is_an_error_with_its_cause(reply: bytes, cause: str) -> None:
    """A stream cut after 2 tokens, or ended by the server's error event, counted as answered: the run read VALID."""
    sock, port = _fake_sse_server(reply)
    with sock:
        res = run_generation_load(f"http://127.0.0.1:{port}", [0.0, 0.01], [4, 4], [4, 4], timeout_s=10)
    s = res.summary()
    assert s["answered"] == 0 and not s["valid"] and s["errors"] == {cause: 2}


def test_the_endpoints_url_reaches_the_endpoint_not_a_404() -> None:
    """``loadtest http://HOST:PORT/v1/generate`` posted to /v1/generate/v1/generate: every request a bare 404."""
    cfg = EngineConfig(model="gpt2", size="tiny", max_seqs=2, kv_tokens=1024)
    with running_generate_server(cfg) as url:
        res = run_generation_load(url + "/v1/generate/", [0.0], [4], [2])
    assert res.summary()["statuses"] == {"200": 1}
