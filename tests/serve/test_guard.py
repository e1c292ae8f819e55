"""Connection-level defences: slow clients are cut off, a connection flood cannot starve real
clients, a foreign Host header is refused, the bearer scheme is case-insensitive."""

from __future__ import annotations

import socket
import time

import httpx
import pytest
from serve_helpers import SlowModel

from rightsize.hosts import allowed_hosts, host_name, is_loopback
from rightsize.serve import ServerConfig, running_server


def _config(**over: object) -> ServerConfig:
    base = {"port": 0, "predict": SlowModel(0.001), "sample_shape": (2,), "workers": 1, "threads": 1,
            "max_batch": 4, "max_wait_ms": 1.0}  # fmt: skip
    return ServerConfig(**(base | over))  # type: ignore[arg-type]


def _open_slow(host: str, port: int, n: int) -> list[socket.socket]:
    """n connections that send half a request line and then nothing (slowloris)."""
    socks = []
    for _ in range(n):
        s = socket.create_connection((host, port), timeout=5)
        s.sendall(b"POST /v1/predict HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        socks.append(s)
    return socks


def _closed_by_server(s: socket.socket) -> bool:
    """Whether the server closed ``s`` (after its 408, for a request it dropped unread)."""
    s.settimeout(0.2)
    try:
        while chunk := s.recv(4096):
            assert chunk.startswith(b"HTTP/1.1 408 "), chunk[:40]
        return True
    except (TimeoutError, BlockingIOError):
        return False
    except OSError:  # reset
        return True


def _until_closed(s: socket.socket, timeout_s: float = 5.0) -> bytes:
    s.settimeout(timeout_s)
    got = b""
    while chunk := s.recv(4096):
        got += chunk
    return got


@pytest.mark.slow  # ~2 s: in `make test`, not `make test-fast`
def test_slow_clients_are_cut_off_and_real_ones_still_served() -> None:
    with running_server(_config(read_timeout_s=1.0, max_connections=64)) as url:
        port = int(url.rsplit(":", 1)[1])
        slow = _open_slow("127.0.0.1", port, 200)  # past the cap: the extra ones are closed on accept
        try:
            t0 = time.perf_counter()
            for _ in range(10):
                r = httpx.post(f"{url}/v1/predict", json={"inputs": [[1, 2]]}, timeout=5)
                assert r.status_code in (200, 503)
            served = sum(
                httpx.post(f"{url}/v1/predict", json={"inputs": [[1, 2]]}, timeout=5).status_code == 200
                for _ in range(5)
            )
            assert time.perf_counter() - t0 < 5
            time.sleep(1.6)  # past the read timeout: every half-sent request has been dropped
            closed = sum(_closed_by_server(s) for s in slow)
            assert closed == len(slow), f"{closed} of {len(slow)} slow connections closed"
            assert served >= 1 or httpx.post(f"{url}/v1/predict", json={"inputs": [[1, 2]]}).status_code == 200
            assert httpx.post(f"{url}/v1/predict", json={"inputs": [[1, 2]]}, timeout=5).status_code == 200
        finally:
            for s in slow:
                s.close()


def test_a_request_not_read_in_time_is_answered_408_and_counted_408_not_499() -> None:
    """A slow client the server dropped had been counted 499 "client left", and got no answer."""
    with running_server(_config(read_timeout_s=0.5)) as url:
        port = int(url.rsplit(":", 1)[1])
        body = b'{"inputs": [[1, 2]]}'
        with socket.create_connection(("127.0.0.1", port), timeout=5) as trickle, \
                socket.create_connection(("127.0.0.1", port), timeout=5) as headers_only, \
                socket.create_connection(("127.0.0.1", port), timeout=5) as idle:  # fmt: skip
            trickle.sendall(b"POST /v1/predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                            b"Content-Length: %d\r\n\r\n" % len(body) + body[:3])  # fmt: skip
            headers_only.sendall(b"POST /v1/predict HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            answers = [_until_closed(trickle), _until_closed(headers_only)]
            assert _until_closed(idle) == b""  # nothing arrived: no request to answer, closed
        detail = b'{"detail":"request not read within 0.5 s (read_timeout_s): send its headers and body at once"}'
        for answer in answers:
            assert answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n") and answer.endswith(b"\r\n\r\n" + detail)
            assert b"\r\nconnection: close\r\n" in answer
        text = httpx.get(f"{url}/metrics").text
        # one read by the endpoint (its body trickled), one whose headers never came (counted by the guard)
        assert 'rightsize_responses_total{code="408"} 2' in text and 'code="499"' not in text


def test_foreign_host_is_refused_and_bearer_is_case_insensitive() -> None:
    with running_server(_config(token="s3cret")) as url:
        ok = {"authorization": "bearer s3cret"}
        assert httpx.post(f"{url}/v1/predict", json={"inputs": [[1, 2]]}, headers=ok).status_code == 200
        assert httpx.post(f"{url}/v1/predict", json={"inputs": [[1, 2]]}, headers={"authorization": "Basic x"}
                          ).status_code == 401  # fmt: skip
        r = httpx.get(f"{url}/healthz", headers={"host": "rebind.example:8000"})
        assert r.status_code == 421 and "loopback" in r.json()["detail"]
        assert httpx.get(f"{url}/healthz", headers={"host": "localhost"}).status_code == 200
        # each refusal is counted: refused DNS-rebinding attempts had been invisible in /metrics
        assert 'rightsize_responses_total{code="421"} 1' in httpx.get(f"{url}/metrics", headers=ok).text
        # no Host at all (an HTTP/1.0 health check) is no rebinding: it had been refused 421
        import socket

        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            sock.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
            assert sock.recv(64).startswith(b"HTTP/1.1 200")


def test_host_names() -> None:
    assert host_name(b"127.0.0.1:8000") == b"127.0.0.1" and host_name(b"[::1]:80") == b"[::1]"
    assert host_name(b"LocalHost") == b"localhost"
    assert is_loopback("::1") and is_loopback("127.0.0.2") and not is_loopback("0.0.0.0")
    assert allowed_hosts("0.0.0.0") is None and b"localhost" in (allowed_hosts("127.0.0.1") or set())
