"""Request templates: URL parsing, default body, headers, the encoded request."""

from __future__ import annotations

import contextlib
import json

import pytest

from rightsize.errors import SpecError
from rightsize.loadgen.target import Target, body_for_server, default_body, parse_header, payload_for_server


def test_bare_url_posts_a_default_body_to_predict() -> None:
    t = Target.from_url("127.0.0.1:8123")
    assert (t.host, t.port, t.path, t.method) == ("127.0.0.1", 8123, "/v1/predict", "POST")
    assert json.loads(t.body) == {"inputs": [[0.0, 0.0, 0.0, 0.0]]}
    head, _, body = t.raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /v1/predict HTTP/1.1"
    assert "Host: 127.0.0.1:8123" in lines
    assert f"Content-Length: {len(t.body)}" in lines
    assert "Content-Type: application/json" in lines
    assert body == t.body


def test_get_path_query_token_and_headers() -> None:
    t = Target.from_url("http://localhost:9000/healthz?x=1", headers=[("X-A", "b")], token="s3cret")
    assert t.method == "GET" and t.path == "/healthz?x=1" and t.body == b""
    text = t.raw.decode()
    assert text.startswith("GET /healthz?x=1 HTTP/1.1\r\n")
    assert "Authorization: Bearer s3cret\r\n" in text and "X-A: b\r\n" in text
    assert "Content-Length" not in text and text.endswith("\r\n\r\n")


def test_body_for_server_follows_the_servers_sample_shape() -> None:
    body = json.loads(body_for_server({"sample_shape": [2, 3], "dtype": "float32"}, samples=2))
    assert body == {"inputs": [[[0.0] * 3] * 2] * 2}
    ints = json.loads(body_for_server({"sample_shape": [4], "dtype": "int64"}))
    assert ints == {"inputs": [[0, 0, 0, 0]]}
    assert body_for_server(None) == default_body()


def test_payload_for_server_sends_large_samples_as_binary_tensors() -> None:
    from rightsize.wire import BINARY_TYPE, decode_tensor

    image = {"sample_shape": [3, 224, 224], "dtype": "float32"}
    body, ctype = payload_for_server(image, samples=2)
    assert ctype == BINARY_TYPE and len(body) < 2 * 3 * 224 * 224 * 4 + 64
    tensor = decode_tensor(body)
    assert tensor.shape == (2, 3, 224, 224) and tensor.dtype.name == "float32" and not tensor.any()
    tokens = {"sample_shape": [64], "dtype": "int64"}
    assert payload_for_server(tokens)[1] == "application/json"  # small: JSON stays readable
    forced, ctype = payload_for_server(tokens, encoding="binary")
    assert ctype == BINARY_TYPE and decode_tensor(forced).dtype.name == "int64"
    with pytest.raises(SpecError, match="--encoding"):
        payload_for_server(tokens, encoding="xml")


@pytest.mark.parametrize("url", ["https://127.0.0.1:1/x", "http://:80/x", "http://h:notaport/"])
def test_bad_urls_name_the_argument(url: str) -> None:
    with pytest.raises(SpecError, match="URL"):
        Target.from_url(url)


def test_parse_header() -> None:
    assert parse_header("X-Key:  v a l ") == ("X-Key", "v a l")
    for bad in ("novalue", ": x", "A B: c"):
        with pytest.raises(SpecError, match="--header"):
            parse_header(bad)


@pytest.mark.parametrize("length", ["99999999999999999999", "1000000000000"])
def test_a_hostile_content_length_on_v1_info_reads_as_no_info(length: str) -> None:
    """`loadtest` against a server answering /v1/info with Content-Length 10^20 raised OverflowError (10^12:
    MemoryError, after asking for a terabyte): a 54-line traceback, exit 1."""
    import socket
    import threading

    from rightsize.loadgen.target import server_info

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)

    def answer() -> None:
        conn, _ = srv.accept()
        conn.recv(65536)
        conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {length}\r\n\r\nabc".encode())
        conn.close()

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    try:
        assert server_info(f"http://127.0.0.1:{srv.getsockname()[1]}", timeout_s=5.0) is None
    finally:
        thread.join(5)
        srv.close()


def test_a_url_with_neither_scheme_nor_port_is_bad_input() -> None:
    """`loadtest notaurl` dialled notaurl:80 and failed as a connection error (exit 1), not as the URL (exit 2)."""
    with pytest.raises(SpecError, match=r"^URL: 'notaurl' has neither http:// nor a :port"):
        Target.from_url("notaurl")
    assert Target.from_url("127.0.0.1:8123").port == 8123 and Target.from_url("http://h/v1/x").port == 80


@pytest.mark.slow  # ~1 s on 2 cores: kept out of make test-fast
def test_a_server_that_drips_its_info_answer_is_cut_at_the_deadline() -> None:
    """A socket timeout bounds each read: a server sending its /v1/info headers a byte at a time held
    `loadtest --timeout-s 2` for its whole life (90 s). The exchange now has one deadline."""
    import socket
    import threading
    import time

    from rightsize.loadgen.target import server_info

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    stop = threading.Event()

    def drip() -> None:
        conn, _ = srv.accept()
        conn.recv(65536)
        with contextlib.suppress(OSError):
            for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 100:
                if stop.is_set():
                    break
                conn.sendall(bytes([byte]))
                time.sleep(0.1)
        conn.close()

    thread = threading.Thread(target=drip, daemon=True)
    thread.start()
    try:
        started = time.monotonic()
        assert server_info(f"http://127.0.0.1:{srv.getsockname()[1]}", timeout_s=1.0) is None
        assert time.monotonic() - started < 3.0  # the drip lasts 12 s
    finally:
        stop.set()
        thread.join(5)
        srv.close()


def test_a_transfer_encoding_header_is_refused() -> None:
    """-H 'Transfer-Encoding: chunked' went out beside our Content-Length, the framing request smuggling uses."""
    with pytest.raises(SpecError, match=r"^--header: 'Transfer-Encoding: chunked': each request's body is sent whole"):
        parse_header("Transfer-Encoding: chunked")


def test_an_explicit_root_path_is_sent_as_given(monkeypatch: pytest.MonkeyPatch) -> None:
    """`loadtest http://host:port/ --json-body ...` had posted to /v1/predict ("/" read as no path), and `/?q=1`
    too: a service served at the root could not be load-tested. Only no path at all means /v1/predict."""
    asked: list[str] = []
    monkeypatch.setattr("rightsize.loadgen.target.server_info", lambda url, *a, **k: asked.append(url))
    t = Target.from_url("http://127.0.0.1:8123/", body=b'{"a":1}')
    assert (t.path, t.method, t.path_chosen) == ("/", "POST", False) and t.raw.startswith(b"POST / HTTP/1.1\r\n")
    t = Target.from_url("http://127.0.0.1:8123/?q=1", method="GET")
    assert (t.path, t.method) == ("/?q=1", "GET") and t.raw.startswith(b"GET /?q=1 HTTP/1.1\r\n")
    t = Target.from_url("http://127.0.0.1:8123/?q=1")
    assert (t.path, t.method) == ("/?q=1", "GET")
    assert asked == []  # a body, a method or a query: "/" is the user's, nothing to ask
    t = Target.from_url("http://127.0.0.1:8123/")  # /v1/info answers nothing: not a rightsize server
    assert (t.path, t.method, t.body, t.path_chosen) == ("/", "GET", b"", False)
    assert asked == ["http://127.0.0.1:8123"]
    assert Target.from_url("http://127.0.0.1:8123", method="GET").path == "/v1/predict"  # no path at all


def test_a_root_path_on_a_rightsize_server_goes_to_predict_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rightsize server serves nothing at /: a plain `http://host:port/` (no body, no method) means its
    /v1/predict, with a body of its sample shape, asked once; ``path_chosen`` tells the CLI to say so."""
    asked: list[str] = []

    def info(url: str, *args: object, **kwargs: object) -> dict[str, object]:
        asked.append(url)
        return {"sample_shape": [2], "dtype": "float32"}

    monkeypatch.setattr("rightsize.loadgen.target.server_info", info)
    t = Target.from_url("http://127.0.0.1:8123/")
    assert (t.path, t.method, t.path_chosen, t.body_guessed) == ("/v1/predict", "POST", True, False)
    assert json.loads(t.body) == {"inputs": [[0.0, 0.0]]} and asked == ["http://127.0.0.1:8123"]
    assert Target.from_url("http://127.0.0.1:8123/", body=b"{}").path == "/"  # a body given: "/" is meant
    assert Target.from_url("http://127.0.0.1:8123/", method="POST").path == "/"
    assert not Target.from_url("http://127.0.0.1:8123").path_chosen  # no path: the documented default, no note
