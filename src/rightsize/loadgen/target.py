"""What to send: one HTTP/1.1 request, pre-encoded once so the hot loop only writes bytes.

target = Target.from_url("http://127.0.0.1:8000/v1/predict", body=b'{"inputs": [[0.0]]}')
target.raw   # b"POST /v1/predict HTTP/1.1\\r\\nHost: ...\\r\\n\\r\\n{...}"
"""

from __future__ import annotations

import contextlib
import http.client
import json
import math
import re
import socket
import threading
from dataclasses import dataclass, field
from functools import partial
from typing import Any
from urllib.parse import SplitResult, urlsplit

from rightsize.errors import SpecError
from rightsize.inputfile import short

__all__ = [
    "DEFAULT_PATH",
    "ENCODINGS",
    "Target",
    "body_for_server",
    "default_body",
    "parse_header",
    "payload_for_server",
    "server_info",
]

# The rightsize server's prediction endpoint; a bare URL ("http://host:port", no path at all) is sent here.
DEFAULT_PATH = "/v1/predict"
ENCODINGS = ("auto", "json", "binary")
# "auto" sends the binary tensor body from this many elements per request up: an image as JSON
# (3x224x224 = 150k floats, ~600 KB) costs the server ~14 ms of parsing per request on a 2-core
# VM (validate, mobilenet_v2), more than the model on one core; token ids and features stay JSON.
BINARY_MIN_ELEMENTS = 4096


def default_body(sample_shape: tuple[int, ...] = (4,), samples: int = 1, dtype: str = "float32") -> bytes:
    """``{"inputs": [...]}`` with ``samples`` all-zero samples of ``sample_shape`` (nested JSON lists)."""
    zero: float | int = 0 if dtype.startswith("int") else 0.0

    def nest(shape: tuple[int, ...]) -> Any:
        if not shape:
            return zero
        if len(shape) == 1:
            return [zero] * shape[0]
        return [nest(shape[1:]) for _ in range(shape[0])]

    return json.dumps({"inputs": [nest(sample_shape) for _ in range(samples)]}, separators=(",", ":")).encode()


# An HTTP method is a token (RFC 9110, 5.6.2): visible characters, no separators; e.g. GET, POST, PROPFIND
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def split_http_url(url: str, example: str) -> tuple[SplitResult, str, int]:
    """``url`` (``host:port`` alone means http://) split, its host and its port; SpecError naming URL for anything but
    http://host[:port][/path] with a port in 1-65535 (``example`` shows the user a good one)."""
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):  # urlsplit drops CR/LF/tab silently
        raise SpecError("URL", f"{short(url)} holds whitespace or a control character (a line break would end the "
                        f"request line); percent-encode it, e.g. %20; expected e.g. {example}")  # fmt: skip
    if "://" not in url and ":" not in url.partition("/")[0]:  # "notaurl" had been dialled as host notaurl:80
        raise SpecError("URL", f"{short(url)} has neither http:// nor a :port; expected e.g. {example}")
    try:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        port = parts.port or 80
    except ValueError as exc:  # "http://[::1", "http://h:99999"
        raise SpecError("URL", f"cannot read {short(url)} ({exc}); expected e.g. {example}") from None
    if parts.scheme != "http":
        raise SpecError("URL", f"only http:// is supported (plain HTTP/1.1), got {short(parts.scheme + '://')}")
    if not parts.hostname:
        raise SpecError("URL", f"no host in {short(url)}; expected e.g. {example}")
    return parts, parts.hostname, port


_INFO_MAX_BYTES = 1 << 20  # a rightsize server's /v1/info is a few hundred bytes


def server_info(url: str, token: str | None = None, timeout_s: float = 5.0) -> dict[str, Any] | None:
    """``GET /v1/info`` of a rightsize server (sample shape, dtype, max batch), or None if it has none or has not
    answered all of it within ``timeout_s`` (a socket timeout bounds each read, so a server sending a byte a second
    had held `loadtest --timeout-s 2` for as long as it kept sending: the whole exchange gets one deadline)."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    if parts.scheme != "http" or not parts.hostname:
        return None
    conn = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=timeout_s)
    answer: list[dict[str, Any] | None] = []
    asking = threading.Thread(target=lambda: answer.append(_ask_info(conn, token)), daemon=True,
                              name="rightsize-server-info")  # fmt: skip
    asking.start()
    asking.join(timeout_s)
    if asking.is_alive():  # past the deadline: cut the connection under the reader, which then returns None
        sock = conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        asking.join(1.0)
        return None
    return answer[0] if answer else None


def _ask_info(conn: http.client.HTTPConnection, token: str | None) -> dict[str, Any] | None:
    """``server_info``'s exchange on ``conn`` (closed afterwards)."""
    try:
        conn.request("GET", "/v1/info", headers={"Authorization": f"Bearer {token}"} if token else {})
        resp = conn.getresponse()
        if resp.status != 200:
            return None
        # a capped read: a hostile Content-Length (10^20) overflowed read() and 10^12 asked it for a terabyte
        data = resp.read(_INFO_MAX_BYTES + 1)
        if len(data) > _INFO_MAX_BYTES:
            return None
        info = json.loads(data)
        return info if isinstance(info, dict) else None
    except (OSError, ValueError, OverflowError, MemoryError, http.client.HTTPException):
        return None
    finally:
        conn.close()


def describes(info: dict[str, Any] | None) -> bool:
    """Whether ``server_info``'s answer gives a sample shape to build a request from (a rightsize server's does)."""
    return isinstance(info, dict) and isinstance(info.get("sample_shape"), list)


def body_for_server(info: dict[str, Any] | None, samples: int = 1) -> bytes:
    """A valid JSON ``/v1/predict`` body for a server described by ``server_info`` (zeros of its sample shape)."""
    return payload_for_server(info, samples, "json")[0]


def payload_for_server(info: dict[str, Any] | None, samples: int = 1, encoding: str = "auto") -> tuple[bytes, str]:
    """(body, content type) of a valid ``/v1/predict`` request of ``samples`` all-zero samples.

    ``encoding``: ``json``, ``binary`` (the server's RSZT tensor format, ``rightsize.wire``) or
    ``auto`` (binary from ``BINARY_MIN_ELEMENTS`` elements per request up). Without ``info`` (not a
    rightsize server) the body is JSON.
    """
    if encoding not in ENCODINGS:
        raise SpecError("--encoding", f"must be one of {', '.join(ENCODINGS)}, got {encoding!r}")
    if info is None or not describes(info):
        return default_body(samples=samples), "application/json"
    shape = tuple(int(d) for d in info["sample_shape"])
    dtype = str(info.get("dtype") or "float32")
    elements = samples * math.prod(shape)
    if encoding == "binary" or (encoding == "auto" and elements >= BINARY_MIN_ELEMENTS):
        import numpy as np

        from rightsize.wire import BINARY_TYPE, encode_tensor

        return encode_tensor(np.zeros((samples, *shape), dtype=dtype)), BINARY_TYPE
    return default_body(shape, samples, dtype), "application/json"


def bearer_header(token: str | None) -> tuple[str, str] | None:
    """The ``Authorization`` header that carries ``token`` (None without one); a SpecError naming ``--token`` when
    it holds a line break (it would end the header and start another)."""
    if not token:
        return None
    if "\r" in token or "\n" in token:
        raise SpecError("--token", "must be one line (no line breaks)")
    return ("Authorization", f"Bearer {token}")


def parse_header(text: str) -> tuple[str, str]:
    """``"X-Key: value"`` -> ``("X-Key", "value")``; raises SpecError naming ``--header``."""
    name, sep, value = text.partition(":")
    name, value = name.strip(), value.strip()
    if not sep or not name or any(c in name for c in " \t\r\n") or "\r" in value or "\n" in value:
        raise SpecError("--header", f"expected 'Name: value', got {text!r}")
    if name.lower() == "transfer-encoding":  # beside our Content-Length: the framing request smuggling uses
        raise SpecError("--header", f"{text!r}: each request's body is sent whole with its Content-Length; drop "
                        "this header")  # fmt: skip
    return name, value


@dataclass(frozen=True)
class Target:
    """One request template: ``raw`` is the complete HTTP/1.1 request, reused for every send."""

    host: str
    port: int
    path: str
    method: str = "POST"
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    body_guessed: bool = field(default=False, compare=False)  # /v1/info did not describe the server: a made-up body
    path_chosen: bool = field(default=False, compare=False)  # "/" given, a rightsize server found: DEFAULT_PATH sent
    raw: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "raw", self._encode())

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        method: str | None = None,
        body: bytes | None = None,
        headers: list[tuple[str, str]] | tuple[tuple[str, str], ...] = (),
        token: str | None = None,
        content_type: str = "application/json",
        samples: int = 1,
        encoding: str = "auto",
        info_timeout_s: float = 5.0,
    ) -> Target:
        """Parse ``http://host[:port][/path]``; no path at all (``http://host:port``) means ``DEFAULT_PATH``. A
        path of ``/`` alone (no query, no ``body``, no ``method``) means ``DEFAULT_PATH`` only when ``/v1/info``
        describes a rightsize server (which serves nothing at ``/``), and ``path_chosen`` says so; any other ``/``
        is sent as given (a service served at the root had been load-tested at /v1/predict instead). Without
        ``body``, a POST to ``DEFAULT_PATH`` asks the server's ``/v1/info`` (waiting up to ``info_timeout_s``) for
        its sample shape and sends ``samples`` zero samples of it (a rightsize server); other servers get a small
        default JSON body, and ``body_guessed`` says so."""
        auth = bearer_header(token)
        if method is not None and not _TOKEN.fullmatch(method):
            raise SpecError("--method", f"{short(method)} is not an HTTP method; give e.g. GET or POST")
        parts, host, port = split_http_url(url, "http://127.0.0.1:8000/v1/predict")
        path, chosen = parts.path, False
        ask_info = partial(server_info, f"http://{parts.netloc}", token, timeout_s=info_timeout_s)
        info: dict[str, Any] | None = None
        if not path:  # urlsplit: "http://h:1" has path "", "http://h:1/" has "/"
            path = DEFAULT_PATH
        elif path == "/" and not parts.query and body is None and method is None:
            info = ask_info()
            if describes(info):
                path, chosen = DEFAULT_PATH, True
        if parts.query:
            path += "?" + parts.query
        guessed = False
        if body is None and path.split("?")[0] == DEFAULT_PATH and (method or "POST").upper() == "POST":
            info = info if chosen else ask_info()
            body, content_type = payload_for_server(info, samples, encoding)
            guessed = not describes(info)
        if body is None:
            body = b""
        hdrs = list(headers)
        names = {k.lower() for k, _ in hdrs}
        if auth is not None:
            hdrs.append(auth)
        if body and "content-type" not in names:
            hdrs.append(("Content-Type", content_type))
        return cls(
            host=host,
            port=port,
            path=path,
            method=(method or ("POST" if body else "GET")).upper(),
            body=body,
            headers=tuple(hdrs),
            body_guessed=guessed,
            path_chosen=chosen,
        )

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}{self.path}"

    def _encode(self) -> bytes:
        host = f"[{self.host}]" if ":" in self.host else self.host
        lines = [f"{self.method} {self.path} HTTP/1.1", f"Host: {host}:{self.port}"]
        lines += [f"{k}: {v}" for k, v in self.headers if k.lower() not in ("host", "content-length")]
        if self.body or self.method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(self.body)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + self.body
