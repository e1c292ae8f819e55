"""A real generation server (uvicorn on 127.0.0.1, tiny GPT-2): streaming, errors, metrics, iterations."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import Iterator

import httpx
import pytest

from rightsize.llm.engine import EngineConfig
from rightsize.llm.server import running_generate_server

CFG = EngineConfig(
    model="gpt2", size="tiny", max_seqs=2, max_queue=2, max_prompt_tokens=64, max_new_tokens=4000, kv_tokens=8192
)


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with running_generate_server(CFG) as base_url:
        yield base_url


def metric(text: str, name: str) -> float:
    """Sum of every sample of ``name`` (any labels) in a Prometheus text page."""
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.split("{")[0].split(" ")[0] == name)


def _events(url: str, body: dict[str, object]) -> list[dict[str, object]]:
    with httpx.stream("POST", f"{url}/v1/generate", json=body, timeout=30) as r:
        assert r.status_code == 200 and r.headers["content-type"] == "text/event-stream"
        return [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: ")]


def test_stream_tokens_then_done_and_the_iteration_log(url: str) -> None:
    start = httpx.get(f"{url}/v1/iterations", params={"since": 10**9}).json()
    assert start["iterations"] == []
    events = _events(url, {"prompt_len": 20, "max_new_tokens": 12})
    tokens, final = events[:-1], events[-1]
    assert len(tokens) == 12 and all(set(e) == {"t"} and 0 <= e["t"] < 1000 for e in tokens)  # type: ignore[operator]
    assert final["done"] is True and final["tokens"] == 12
    assert 0 <= final["queue_ms"] <= final["ttft_ms"] and final["tpot_ms"] > 0  # type: ignore[operator]
    log = httpx.get(f"{url}/v1/iterations", params={"since": start["next"]}).json()
    rows = log["iterations"]
    assert log["next"] == start["next"] + len(rows) == start["next"] + 12
    assert rows[0]["kind"] == "prefill" and rows[0]["tokens"] == 20 and rows[0]["context_tokens"] == 0
    assert [r["kind"] for r in rows[1:]] == ["decode"] * 11 and rows[1]["context_tokens"] == 21
    assert set(rows[0]) == {"i", "t_s", "kind", "seqs", "tokens", "context_tokens", "ms"}
    assert httpx.get(f"{url}/v1/iterations", params={"since": -1}).status_code == 422
    bad = httpx.get(f"{url}/v1/iterations", params={"since": "abc"})  # was pydantic's error list
    assert bad.status_code == 422 and bad.json() == {
        "detail": "since: must be a whole number >= 0 (the 'next' of a previous reply), got 'abc'"}  # fmt: skip
    assert httpx.get(f"{url}/v1/iterations", params={"since": 2**63}).json()["iterations"] == []  # was a 500


def test_non_stream_matches_the_stream_for_the_same_prompt(url: str) -> None:
    body = {"prompt": [5, 6, 7, 8], "max_new_tokens": 6}
    streamed = [e["t"] for e in _events(url, body)[:-1]]
    r = httpx.post(f"{url}/v1/generate", json=body | {"stream": False})
    assert r.status_code == 200
    reply = r.json()
    assert reply["tokens"] == streamed and {"queue_ms", "ttft_ms", "tpot_ms"} <= set(reply)
    # prompt_len prompts are seeded per request: the same explicit seed gives the same tokens.
    a, b = (httpx.post(f"{url}/v1/generate", json={"prompt_len": 9, "seed": 3, "max_new_tokens": 4, "stream": False})
            for _ in range(2))  # fmt: skip
    assert a.json()["tokens"] == b.json()["tokens"]


@pytest.mark.parametrize(
    ("body", "status", "names"),
    [
        (b"{not json", 400, "JSON"),
        (b"[1, 2]", 422, "body"),
        (b'{"prompt": [1], "prompt_len": 2}', 422, "exactly one"),
        (b'{"promt": [1]}', 422, "Did you mean 'prompt'"),
        (b'{"prompt": "hello"}', 422, "prompt"),
        (b'{"prompt": [1, 1000]}', 422, "vocabulary"),
        (b'{"prompt_len": 0}', 422, "prompt_len"),
        (b'{"prompt_len": 4, "max_new_tokens": 4001}', 422, "max_new_tokens"),
        (b'{"prompt_len": 4, "stream": "yes"}', 422, "stream"),
        (b'{"prompt_len": 65}', 413, "max_prompt_tokens=64"),
        (b'{"prompt": [' + b",".join([b"1"] * 65) + b"]}", 413, "max_prompt_tokens=64"),
        (b'{"prompt": [1], "seed": 5}', 422, "seed: draws a prompt_len request's prompt"),  # was ignored
        (b'{"prompt_len": "' + b"x" * 100_000 + b'"}', 422, "got 'xxxxx"),  # echoed whole: 100 kB back
    ],
)
def test_errors_name_the_field(url: str, body: bytes, status: int, names: str) -> None:
    r = httpx.post(f"{url}/v1/generate", content=body, headers={"content-type": "application/json"})
    assert r.status_code == status and names in r.json()["detail"], r.text
    assert len(r.json()["detail"]) < 300


def test_a_body_of_another_content_type_is_415_and_none_reads_as_json(url: str) -> None:
    """A web page's cross-site form or text/plain POST started generating on a server without a token."""
    body = b'{"prompt_len": 4, "max_new_tokens": 2, "stream": false}'
    for ctype in ("text/plain", "application/x-www-form-urlencoded"):
        r = httpx.post(f"{url}/v1/generate", content=body, headers={"content-type": ctype})
        assert r.status_code == 415 and "must be application/json" in r.json()["detail"]
    r = httpx.post(f"{url}/v1/generate", content=body, headers={"content-type": "application/json; charset=utf-8"})
    assert r.status_code == 200 and len(r.json()["tokens"]) == 2
    r = httpx.post(f"{url}/v1/generate", content=body)  # no content type at all
    assert r.status_code == 200


@pytest.mark.slow
def test_queue_full_is_503_with_retry_after(url: str) -> None:
    async def burst() -> list[httpx.Response]:
        body = {"prompt_len": 8, "max_new_tokens": 1500, "stream": False}
        async with httpx.AsyncClient(timeout=60) as c:
            return list(await asyncio.gather(*(c.post(f"{url}/v1/generate", json=body) for _ in range(10))))

    replies = asyncio.run(burst())  # up to 2 wait, 2 run; the rest arrive while those run
    codes = [r.status_code for r in replies]
    assert set(codes) == {200, 503} and codes.count(200) >= 2, codes  # at least the first max_queue
    refused = next(r for r in replies if r.status_code == 503)
    assert refused.headers["retry-after"] == "1" and "max_queue=2" in refused.json()["detail"]
    assert all(len(r.json()["tokens"]) == 1500 for r in replies if r.status_code == 200)


def test_disconnect_cancels_in_the_engine(url: str) -> None:
    before = httpx.get(f"{url}/metrics").text
    with httpx.stream("POST", f"{url}/v1/generate", json={"prompt_len": 8, "max_new_tokens": 4000}) as r:
        lines = r.iter_lines()
        assert next(lines).startswith("data: ")  # one token seen, then the client leaves
    deadline = time.monotonic() + 10
    while True:
        text = httpx.get(f"{url}/metrics").text
        gone = metric(text, "rightsize_llm_requests_total") - metric(before, "rightsize_llm_requests_total")
        if gone == 1 and metric(text, "rightsize_llm_running") == 0:
            break
        assert time.monotonic() < deadline, "the engine kept generating for a client that left"
        time.sleep(0.02)
    assert 'rightsize_llm_requests_total{code="499"}' in text
    generated = metric(text, "rightsize_llm_tokens_total") - metric(before, "rightsize_llm_tokens_total")
    assert generated < 4000  # cancelled early, not run to the end


def test_metrics_info_health(url: str) -> None:
    _events(url, {"prompt_len": 4, "max_new_tokens": 3})
    text = httpx.get(f"{url}/metrics").text
    ok = float(next(line for line in text.splitlines() if 'code="200"' in line).rsplit(" ", 1)[1])
    assert ok >= 1
    for name in ("rightsize_llm_ttft_seconds", "rightsize_llm_tpot_seconds", "rightsize_llm_queue_seconds"):
        assert f"# TYPE {name} histogram" in text and f'{name}_bucket{{le="+Inf"}}' in text
        assert metric(text, f"{name}_count") >= ok  # one observation per finished request
    assert metric(text, "rightsize_llm_tokens_total") >= 3 and "rightsize_llm_preemptions_total 0" in text
    assert "rightsize_llm_waiting 0" in text
    info = httpx.get(f"{url}/v1/info").json()
    assert info["vocab_size"] == 1000 and info["max_seqs"] == 2 and info["block_tokens"] == 16
    assert info["max_prompt_tokens"] == 64 and info["url"] == url
    assert httpx.get(f"{url}/healthz").json() == {"status": "ok"}
    assert httpx.get(f"{url}/readyz").json() == {"ready": True}


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["serve", "resnet50", "--generate"], "the generation engine serves gpt2 or llama-1b only"),
        (["serve", "gpt2", "--generate", "--size", "huge"], "--size"),
        (["serve", "gpt2", "--size", "tiny"], "add --generate"),
        (["serve", "gpt2", "--max-new-tokens", "5"], "--max-new-tokens: only applies to a generation server"),
        # the engine's own check, under the flags the user typed
        (["serve", "gpt2", "--generate", "--size", "tiny", "--max-prompt-tokens", "9000"], "--kv-tokens: 8192 cannot"),
    ],
)
def test_cli_generate_errors_exit_2(argv: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    from rightsize.cli.app import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and says in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_cli_generate_limits_reach_the_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    import rightsize.llm.server as server
    from rightsize.cli.app import main

    seen: dict[str, object] = {}
    monkeypatch.setattr(server, "serve_generate", lambda cfg, *a, **k: seen.update(cfg=cfg, token=a[-1]))
    with pytest.raises(SystemExit) as exc:
        main(["serve", "gpt2", "--generate", "--size", "tiny", "--queue-size", "3", "--max-prompt-tokens", "32",
              "--max-new-tokens", "8", "--max-seqs", "2", "--token", "t0k"])  # fmt: skip
    assert exc.value.code == 0
    cfg = seen["cfg"]
    assert isinstance(cfg, EngineConfig) and seen["token"] == "t0k"
    assert (cfg.max_queue, cfg.max_prompt_tokens, cfg.max_new_tokens, cfg.max_seqs) == (3, 32, 8, 2)


@pytest.mark.parametrize("stream", [True, False])
def test_a_reply_cut_by_the_shutdown_ends_with_an_error_not_a_traceback(stream: bool) -> None:
    """At the end of uvicorn's grace period the request task is cancelled: the CancelledError escaped (a traceback
    per stream) and the client saw the stream stop mid-way, no error event and no end of the chunked body."""
    from rightsize.llm.server import STOPPING, GenerateEndpoint, GenerateService

    async def run() -> list[dict[str, object]]:
        svc = GenerateService(CFG)
        await svc.start()
        sent: list[dict[str, object]] = []
        body = json.dumps({"prompt_len": 8, "max_new_tokens": 4000, "stream": stream}).encode()
        inbox = [{"type": "http.request", "body": body, "more_body": False}]

        async def receive() -> dict[str, object]:
            if inbox:
                return inbox.pop()
            await asyncio.Event().wait()  # the client stays: only the shutdown ends this request
            raise AssertionError

        async def send(message: dict[str, object]) -> None:
            sent.append(message)

        scope = {"type": "http", "method": "POST", "path": "/v1/generate", "headers": []}
        task = asyncio.ensure_future(GenerateEndpoint(svc)(scope, receive, send))
        deadline = time.monotonic() + (20 if stream else 0.5)
        while time.monotonic() < deadline and len(sent) < 3:  # tokens flow (stream) or gather (collect)
            await asyncio.sleep(0.05)
        task.cancel()
        await asyncio.wait_for(task, 10)  # returns: no CancelledError escapes to uvicorn's log
        await svc.stop()
        assert svc.responses[503] == 1
        return sent

    sent = asyncio.run(run())
    last = sent[-1]
    assert last["type"] == "http.response.body" and last.get("more_body", False) is False
    if stream:  # the token events, then the error
        assert sent[0]["status"] == 200 and len(sent) > 2  # tokens went out before the cut
        assert json.loads(bytes(last["body"]).decode().removeprefix("data: ")) == {"error": STOPPING}
    else:
        assert sent[0]["status"] == 503 and json.loads(bytes(last["body"])) == {"detail": STOPPING}


def test_nan_and_out_of_range_numbers_are_not_json_here_either(url: str) -> None:
    """The generation server read `NaN` and 1e400 with the stdlib parser: 422 "got nan" / "got inf"."""
    for body in (b'{"prompt_len": NaN}', b'{"prompt_len": 4, "max_new_tokens": 1e400}'):
        r = httpx.post(f"{url}/v1/generate", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 400 and r.json()["detail"].startswith("body is not valid JSON"), r.text


def test_405s_on_generate_are_counted(url: str) -> None:
    """Starlette's router had answered them before the endpoint counted: rightsize_llm_requests_total missed them."""

    def answered_405() -> float:
        text = httpx.get(f"{url}/metrics").text
        return metric("\n".join(x for x in text.splitlines() if 'code="405"' in x), "rightsize_llm_requests_total")

    before = answered_405()
    for method in ("GET", "PUT"):
        r = httpx.request(method, f"{url}/v1/generate")
        assert (r.status_code, r.headers["allow"]) == (405, "POST")
        assert r.json() == {"detail": f"{method} is not allowed on /v1/generate; use POST"}
    assert answered_405() - before == 2


def test_a_request_the_guard_dropped_unread_is_counted_408_not_499() -> None:
    """The connection guard (serve/guard.py, tested on a live server in tests/serve/test_guard.py) flags a request
    whose body it stopped waiting for; the endpoint had counted the disconnect it then sees as 499 "client left"."""
    from types import SimpleNamespace

    from rightsize.llm.server import GenerateEndpoint
    from rightsize.serve.guard import TIMED_OUT

    done: list[int] = []
    svc = SimpleNamespace(engine=None, on_done=lambda status, _stats: done.append(status))
    endpoint = GenerateEndpoint(svc)  # type: ignore[arg-type]

    async def disconnect() -> dict[str, object]:
        return {"type": "http.disconnect"}

    async def send(_message: object) -> None:
        raise AssertionError("nothing is sent: the guard answered 408 itself")

    for flagged, status in ((True, 408), (False, 499)):
        scope = {"method": "POST", "path": "/v1/generate", "headers": [], **({TIMED_OUT: True} if flagged else {})}
        asyncio.run(endpoint(scope, disconnect, send))
        assert done.pop() == status


def test_the_probes_answer_head_as_load_balancers_send_it(url: str) -> None:
    for probe in ("/healthz", "/readyz"):  # 405 before
        head = httpx.head(f"{url}{probe}")
        assert head.status_code == 200 and head.content == b"", probe


@pytest.mark.slow  # a server process, cut off at the end of its 5 s grace period (~15 s)
def test_a_stop_that_cuts_requests_off_says_so() -> None:
    """SIGTERM with a long stream running: uvicorn cancelled it when the grace period ran out, then the server said
    "stopped: requests in flight were answered"."""
    import signal
    import threading

    from serve_helpers import start_ready

    proc, ready = start_ready(["gpt2", "--generate", "--size", "tiny", "--max-prompt-tokens", "16", "--max-new-tokens",
                               "4000", "--max-seqs", "1"])  # fmt: skip
    try:
        started = threading.Event()

        def stream() -> None:
            body = {"prompt_len": 8, "max_new_tokens": 4000, "stream": True}
            with contextlib.suppress(httpx.HTTPError), httpx.stream("POST", f"{ready['url']}/v1/generate", json=body,
                                                                    timeout=60) as r:  # fmt: skip
                for _ in r.iter_lines():
                    started.set()

        clients = [threading.Thread(target=stream, daemon=True) for _ in range(4)]  # one at a time: ~10 s of work
        for c in clients:
            c.start()
        assert started.wait(30)
        # all four in the server before the stop: a client still connecting when the socket closed left one ~2.7 s
        # request running, answered inside the grace period (CI read "requests in flight were answered")
        deadline = time.monotonic() + 30
        while "rightsize_llm_waiting 3" not in httpx.get(f"{ready['url']}/metrics").text:
            assert time.monotonic() < deadline, "the four requests never reached the server"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 143 and "Traceback" not in err, err
    assert re.search(
        r"stopped: [1-4] request\(s\) still running when the 5 s grace period ran out were cut off", err
    ), err


@pytest.mark.slow  # a CLI server process: ~15 s on 2 cores
def test_the_read_timeout_is_the_prediction_servers_knob() -> None:
    """The generation server's read timeout was a fixed 10 s (a second constant beside ServerConfig.read_timeout_s):
    a long prompt from a slow client could not be given more time, nor a slowloris less. `rightsize serve
    --read-timeout-s` sets it for both servers."""
    import socket
    from urllib.parse import urlsplit

    from serve_helpers import start_ready

    proc, ready = start_ready(["gpt2", "--generate", "--size", "tiny", "--read-timeout-s", "0.5"])
    try:
        port = urlsplit(ready["url"]).port
        body = b'{"prompt_len": 8, "max_new_tokens": 2}'
        with socket.create_connection(("127.0.0.1", port or 0), timeout=10) as trickle:
            trickle.sendall(b"POST /v1/generate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                            b"Content-Length: %d\r\n\r\n" % len(body) + body[:3])  # fmt: skip
            t0, answer = time.perf_counter(), b""
            while chunk := trickle.recv(4096):
                answer += chunk
            waited = time.perf_counter() - t0
        assert answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), answer[:200]
        assert answer.endswith(b'{"detail":"request not read within 0.5 s (read_timeout_s): send its headers and body '
                               b'at once"}')  # fmt: skip
        assert waited < 8, waited  # 0.5 s, not the 10 s it had been (a busy machine's margin)
        answered = httpx.post(f"{ready['url']}/v1/generate", json={"prompt_len": 8, "max_new_tokens": 2}, timeout=60)
        assert answered.status_code == 200  # a request sent at once is served
    finally:
        proc.kill()
        proc.communicate(timeout=30)
