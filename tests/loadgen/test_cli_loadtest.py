"""``rightsize loadtest``: JSON output, storage, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lg_tiny_server import TinyServer

from rightsize.cli.app import main
from rightsize.store import Store


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(["loadtest", *args])
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


def test_open_loop_json_keys_and_store(server: TinyServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "s.sqlite"
    # A generous lag bound: this test is about the output, not about the shared machine's punctuality.
    args = [server.url("/work/1"), "--rate", "100", "--requests", "20", "--slo-ms", "5000", "--max-lag-ms", "1000"]
    rc, out, _ = run_cli([*args, "--json", "--store", str(store)], capsys)
    assert rc == 0
    d = json.loads(out)
    for key in (
        "mode", "coordinated_omission", "offered_rate_per_s", "achieved_rate_per_s", "throughput_per_s",
        "goodput_per_s", "latency_ms", "send_lag_ms", "errors", "status_counts", "valid", "problems",
        "requests_sent", "responses_ok", "latency_hdr", "artifact_id",
    ):  # fmt: skip
        assert key in d, key
    assert set(d["latency_ms"]) >= {"p50", "p90", "p95", "p99", "p99_9", "max"}
    assert d["mode"] == "open" and d["coordinated_omission"] == "corrected" and d["valid"] is True
    assert d["requests_sent"] == 20 == d["responses_ok"] and d["offered_rate_per_s"] == 100
    assert d["goodput_per_s"] == pytest.approx(d["throughput_per_s"])
    # the server listens on this machine: the run watched what other processes did meanwhile (a share of the cores)
    assert isinstance(d["others_busy_share"], float) and 0.0 <= d["others_busy_share"] <= 1.0
    stored = Store(store).artifacts(kind="loadtest")
    assert [a["id"] for a in stored] == [d["artifact_id"]]
    assert stored[0]["payload"]["requests_sent"] == 20


def test_closed_loop_is_labelled(server: TinyServer, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_cli([server.url("/work/1"), "--concurrency", "3", "--requests", "30", "--no-store"], capsys)
    assert rc == 0
    assert "closed-loop" in out and "coordinated-omission-affected" in out and "VALID" in out


@pytest.mark.slow  # seconds: make test runs it, make test-fast skips it
def test_knee_search_json(server: TinyServer, capsys: pytest.CaptureFixture[str]) -> None:
    args = [server.url("/work/1"), "--find-knee", "--slo-p95", "2000", "--start-rate", "40", "--duration", "0.4"]
    rc, out, _ = run_cli([*args, "--max-steps", "2", "--max-lag-ms", "1000", "--no-store", "--json"], capsys)
    assert rc == 0
    knee = json.loads(out)["knee"]
    assert knee["rate_per_s"] == 80 and [s["rate_per_s"] for s in knee["steps"]] == [40, 80]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "exactly one of --rate"),
        (["--rate", "5", "--concurrency", "2"], "exactly one of --rate"),
        (["--find-knee"], "--slo-p95"),
        (["--rate", "5", "--arrival", "bursty"], "--arrival"),
        (["--rate", "5", "--json-body", "{nope"], "--json-body"),
        (["--rate", "5", "--header", "bad"], "--header"),
        (["--rate", "5", "--encoding", "xml"], "--encoding"),
        (["--rate", "nan"], "--rate: must be a finite number"),
        (["--rate", "5", "--timeout-s", "nan"], "--timeout-s"),
        (["--rate", "5", "--max-lag-ms", "nan"], "--max-lag-ms"),
        (["--find-knee", "--slo-p95", "nan"], "--slo-p95"),
        (["--rate", "inf"], "--rate"),
        # one request a hundred seconds away: the run had lasted 1/rate, far past --duration
        (["--rate", "0.01", "--duration", "2"], "--rate: 0.01/s for 2 s schedules no request"),
        (["--rate", "5", "--duration", "2", "--warmup-s", "5"], "--warmup-s: 5 s leaves nothing"),
        # the send times of 86.4e9 requests: a 644 GiB allocation and a traceback
        (["--rate", "1e6", "--duration", "86400"], "--rate: 1e+06/s schedules 86,400,000,000 requests; at most"),
        (["--generate", "--rate", "1e6", "--requests", "1000000000000"], "schedules 1,000,000,000,000 requests"),
        (["--find-knee", "--slo-p95", "100", "--start-rate", "1e6", "--duration", "86400"], "requests; at most 10,"),
        # it was sent, answered 400 and stored as a load test
        (
            ["--rate", "2", "--method", "FOO"],
            "--method: 'FOO' is not an HTTP method; give one of GET, POST, PUT, PATCH",
        ),
    ],
)
def test_bad_input_exits_2(
    server: TinyServer, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    rc, _, err = run_cli([server.url("/work/0"), *args, "--no-store"], capsys)
    assert rc == 2 and message in err


def test_unreachable_server_exits_1(closed_port: int, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run_cli([f"http://127.0.0.1:{closed_port}", "--rate", "5", "--no-store"], capsys)
    assert rc == 1 and "cannot connect" in err and "guessed body" not in err


def test_a_guessed_body_is_said(server: TinyServer, capsys: pytest.CaptureFixture[str]) -> None:
    """A bare URL whose /v1/info says nothing got a made-up 4-feature body without a word: a slow rightsize server
    would have answered every request 422."""
    args = ["--rate", "20", "--requests", "4", "--slo-ms", "5000", "--max-lag-ms", "1000", "--no-store"]
    _, _, err = run_cli([server.url(""), *args], capsys)  # the tiny server answers no /v1/info
    assert err.startswith(
        f"warning: 127.0.0.1:{server.port}/v1/info did not describe the server (not a rightsize "
        'server, or no answer in 5 s): sending a guessed body {"inputs":[[0.0,0.0,0.0,0.0]]}; pass'
    )
    _, _, err = run_cli([server.url(""), *args, "--timeout-s", "2"], capsys)
    assert "no answer in 2 s" in err
    _, _, err = run_cli([server.url("/v1/predict"), *args, "--json-body", '{"inputs": [[1.0]]}'], capsys)
    assert "guessed" not in err  # a body given: nothing guessed


def test_an_invalid_run_exits_1(server: TinyServer, capsys: pytest.CaptureFixture[str]) -> None:
    # A p99 send-lag bound of 1 µs cannot be met: the run is flagged invalid, printed, and exits 1.
    args = [server.url("/work/0"), "--rate", "200", "--requests", "40", "--max-lag-ms", "0.001", "--no-store"]
    rc, out, _ = run_cli(args, capsys)
    assert rc == 1 and "INVALID: generator fell behind" in out


@pytest.mark.slow  # > 1.9 s: make test runs it, make test-fast skips it
def test_binary_bodies_are_served(capsys: pytest.CaptureFixture[str]) -> None:
    """``--encoding binary`` sends the server's tensor format; every request is answered 200."""
    from rightsize.serve import ServerConfig, running_server

    with running_server(ServerConfig(model="simplenet", tiny=True, port=0, max_batch=4)) as url:
        args = [url, "--rate", "40", "--duration", "1", "--encoding", "binary", "--no-store", "--json"]
        rc, out, _ = run_cli(args, capsys)
    result = json.loads(out)
    assert result["responses_ok"] == result["requests_sent"] >= 30 and result["errors"] == {}, result
    assert rc in (0, 1)  # 1 only when this shared machine made the generator fall behind


def test_a_body_that_is_a_directory_and_a_foreign_scheme_say_what_they_are(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--body d` (a directory) read "no file 'd'"; `ftp://...` read "got 'ftp'://" (the quote misplaced)."""
    rc, _, err = run_cli(["http://127.0.0.1:9/v1/predict", "--body", str(tmp_path), "--rate", "1", "--no-store"],
                         capsys)  # fmt: skip
    assert rc == 2 and f"--body: {str(tmp_path)!r} is a directory; give the file holding the request body" in err
    rc, _, err = run_cli(["ftp://127.0.0.1:9/x", "--rate", "1", "--no-store"], capsys)
    assert rc == 2 and "got 'ftp://'" in err


@pytest.mark.slow  # ~1 s on 2 cores: kept out of make test-fast
def test_a_root_url_loads_the_root(server: TinyServer, capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """`loadtest http://host:port/ --json-body ...` printed "open-loop load on http://host:port/v1/predict" and the
    server counted every POST at /v1/predict; a rightsize server (its /v1/info describes a model) still gets
    /v1/predict for a plain "/", and the run says the path was chosen."""
    args = ["--rate", "20", "--requests", "10", "--max-lag-ms", "1000", "--no-store"]
    rc, out, err = run_cli([server.url("/"), *args, "--json-body", '{"a":1}'], capsys)
    assert rc == 0 and out.startswith(f"open-loop load on http://127.0.0.1:{server.port}/: ") and server.requests == 10
    assert "note:" not in err.replace("note: other processes", "")
    monkeypatch.setattr("rightsize.loadgen.target.server_info", lambda *a, **k: {"sample_shape": [1]})
    rc, out, err = run_cli([server.url("/"), *args], capsys)
    assert rc == 0 and out.startswith(f"open-loop load on http://127.0.0.1:{server.port}/v1/predict: ")
    assert err.startswith(f"note: 127.0.0.1:{server.port} is a rightsize server (its /v1/info describes a model) "
                          "and serves nothing at /: sending to /v1/predict; give --method or a body (--json-body, "
                          "--body) to load / itself")  # fmt: skip
