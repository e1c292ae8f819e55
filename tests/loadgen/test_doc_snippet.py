"""docs/loadtesting.md's Python snippet, run as written against `rightsize serve distilbert --tiny`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rightsize.loadgen import OpenLoopConfig, Target, run_open_loop
from rightsize.serve import ServerConfig
from rightsize.serve.server import running_server

DOC = Path(__file__).resolve().parents[2] / "docs" / "loadtesting.md"


@pytest.fixture(scope="module")
def tiny_server() -> str:  # type: ignore[misc]
    with running_server(ServerConfig(model="distilbert", tiny=True, port=0)) as url:
        yield url


@pytest.mark.slow  # > 1.3 s: make test runs it, make test-fast skips it
def test_the_documented_snippet_gets_valid_answers(tiny_server: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = re.search(r"```python\n(from rightsize.loadgen import.*?)```", DOC.read_text(), re.S)
    assert code, "the snippet is gone from docs/loadtesting.md"
    snippet = code.group(1).replace("http://127.0.0.1:8000", tiny_server)
    snippet = re.sub(r"rate_per_s=\d+, duration_s=\d+", "rate_per_s=40, duration_s=1.5", snippet)  # bounded here
    for _ in range(3):  # a busy machine can make the sender fall behind; the run is then rightly invalid
        scope: dict[str, object] = {}
        exec(compile(snippet, str(DOC), "exec"), scope)  # the user's copy-paste, with our URL and a short run
        result = scope["result"]
        lagged = all("generator fell behind" in p for p in result.problems)  # type: ignore[attr-defined]
        if result.valid or not lagged:  # type: ignore[attr-defined]
            break
    assert result.valid, result.problems  # type: ignore[attr-defined]
    assert result.responses_ok > 20 and result.error_count == 0  # type: ignore[attr-defined]
    assert "VALID" in capsys.readouterr().out


@pytest.mark.slow  # ~1 s on 2 cores: kept out of make test-fast
def test_a_wrong_body_is_invalid_not_valid(tiny_server: str) -> None:
    # float32[4] is what the generator sent before it read /v1/info: the tiny DistilBERT wants 16 token ids
    target = Target.from_url(tiny_server, body=b'{"inputs": [[0.0, 0.0, 0.0, 0.0]]}')
    result = run_open_loop(target, OpenLoopConfig(rate_per_s=20, duration_s=1.0))
    assert not result.valid
    assert any("client errors" in p and "/v1/info" in p for p in result.problems)


def test_from_url_reads_the_servers_input(tiny_server: str) -> None:
    target = Target.from_url(tiny_server, samples=2)
    assert target.path == "/v1/predict" and target.method == "POST"
    body = target.body.decode()
    assert body.count("[") == 3 and body.count("0") == 32  # 2 samples x 16 token ids, int zeros


@pytest.mark.slow  # seconds: make test runs it, make test-fast skips it
def test_unanswered_requests_make_a_run_invalid() -> None:
    """A server that accepts connections and never replies: the run says how many were answered."""
    import socket
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])  # read nothing, answer nothing
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        port = listener.getsockname()[1]
        target = Target.from_url(f"http://127.0.0.1:{port}", body=b'{"inputs": [[0.0]]}')
        result = run_open_loop(target, OpenLoopConfig(rate_per_s=20, duration_s=0.5, timeout_s=0.5))
    finally:
        stop.set()
        thread.join(timeout=2)
        for s in held:
            s.close()
        listener.close()
    assert not result.valid
    assert any("were answered" in p and "0 of" in p for p in result.problems), result.problems
