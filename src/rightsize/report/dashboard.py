"""``rightsize dashboard``: a local, read-only web app over the results store (standard library only).

    with running_dashboard("store.sqlite") as base_url:    # free port, background thread
        httpx.get(base_url + "/cost?device_class=gpu")
    serve_dashboard("store.sqlite", host="127.0.0.1", port=8765)   # blocking (the CLI)

Each request opens the store, renders a page (``dashboard_views``, ``dashboard_cost``) and closes
it; only GET and HEAD are answered, so nothing can change the store through the dashboard. WAL
mode lets it read while a sweep writes.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from rightsize.catalog import Catalog
from rightsize.errors import NotFoundError, RightsizeError, SpecError
from rightsize.hosts import allowed_hosts, check_host, host_error, host_name
from rightsize.report.fmt import esc

__all__ = ["DashboardServer", "make_server", "render_api", "render_path", "running_dashboard", "serve_dashboard"]


def _csp() -> str:
    """Inline-only pages: no request may leave the page, and the one script that may run is ours,
    pinned by its hash (an injected ``<script>`` would not run even if escaping ever failed)."""
    from rightsize.report.dashboard_views import SCRIPT

    digest = base64.b64encode(hashlib.sha256(SCRIPT.encode("utf-8")).digest()).decode()
    return (
        f"default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{digest}'; img-src data:; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    )


CSP = _csp()
TOKEN_COOKIE = "rightsize_token"


def cookie_values(headers: list[str], name: str) -> list[str]:
    """The values of every ``name=value`` pair in Cookie headers, split on ';' as browsers send them. SimpleCookie
    dropped the whole header at one pair outside strict cookie syntax (another app's ``theme=dark mode`` on the
    same 127.0.0.1), and the token beside it with it: the dashboard answered 401 to the right token."""
    out = []
    for header in headers:
        for pair in header.split(";"):
            key, eq, value = pair.strip().partition("=")
            if eq and key.strip() == name:
                out.append(value.strip().strip('"'))
    return out


def render_api(store_path: Path, target: str) -> tuple[int, str, str]:
    """(HTTP status, body, content type) for ``/api/...`` (``dashboard_api``)."""
    import json

    from rightsize.report.dashboard_api import api_response
    from rightsize.store import Store

    url = urlsplit(target)
    parts = [unquote(p) for p in url.path.split("/") if p][1:]
    with Store(store_path, read_only=True) as st:
        try:
            return api_response(st, parts, parse_qs(url.query))
        except NotFoundError as exc:
            return 404, json.dumps({"error": str(exc)}), "application/json"
        except SpecError as exc:  # a query value the endpoint does not know
            return 400, json.dumps({"error": str(exc)}), "application/json"


def render_path(store_path: Path, target: str, catalog: Catalog | None = None) -> tuple[int, str]:
    """(HTTP status, HTML) for a request target such as ``/compare?run=a&run=b``; ``catalog`` prices measured
    points and gives a report's GPU tiers (None: unpriced, no tiers)."""
    from rightsize.report import dashboard_views as views
    from rightsize.report.dashboard_compare import compare_page
    from rightsize.report.dashboard_cost import cost_page
    from rightsize.store import Store

    url = urlsplit(target)
    query = parse_qs(url.query)
    parts = [unquote(p) for p in url.path.split("/") if p]
    with Store(store_path, read_only=True) as st:
        try:
            if not parts:
                return 200, views.index_page(st)
            if parts == ["cost"]:
                return 200, cost_page(st, query, catalog)
            if parts == ["compare"]:
                return 200, compare_page(st, query.get("run", []))
            if len(parts) == 2 and parts[0] == "run":
                return 200, views.run_page(st, parts[1])
            if len(parts) == 2 and parts[0] == "report":
                return 200, views.report_page(st, parts[1], catalog)
        except NotFoundError as exc:
            return 404, views.not_found(str(exc))
        except SpecError as exc:  # a query value the page does not know
            return 400, views.bad_request(str(exc))
        return 404, views.not_found(f"no page {url.path!r}")


class _Handler(BaseHTTPRequestHandler):
    server: DashboardServer
    server_version = "rightsize-dashboard"

    def handle(self) -> None:
        """A client that leaves before its answer (a reset, a closed pipe) is nothing to report: it had printed a
        ConnectionResetError traceback on the dashboard's stderr."""
        try:
            super().handle()
        except ConnectionError:
            self.close_connection = True

    def _send(
        self, status: int, body: str, head_only: bool = False, content_type: str = "text/html; charset=utf-8"
    ) -> None:
        data = body.encode("utf-8")
        self.send_response(status)
        if status == HTTPStatus.METHOD_NOT_ALLOWED:
            self.send_header("Allow", "GET, HEAD")
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", CSP)
        if self.server.token is not None and status < 400:  # the token travels in a cookie after first use
            self.send_header("Set-Cookie", f"{TOKEN_COOKIE}={self.server.token}; HttpOnly; SameSite=Strict; Path=/")
        self.end_headers()
        if not head_only:
            self.wfile.write(data)

    def _refused(self) -> tuple[int, str] | None:
        """(status, why) when this request may not see the store (None: it may): two Host headers, a foreign
        Host, a missing token."""
        allowed = self.server.allowed
        if len(self.headers.get_all("Host") or []) > 1:
            return 400, "the request carries more than one Host header"
        if allowed is not None and host_name(self.headers.get("Host", "").encode("latin-1")) not in allowed:
            return 421, "the Host header does not name this server (it listens on loopback only)"
        token = self.server.token
        if token is None:
            return None
        given = [v for v in parse_qs(urlsplit(self.path).query).get("token", [])]
        auth = self.headers.get("Authorization", "")
        if auth[:7].lower() == "bearer ":
            given.append(auth[7:].strip())
        given += cookie_values(self.headers.get_all("Cookie") or [], TOKEN_COOKIE)
        if any(hmac.compare_digest(g.encode(), token.encode()) for g in given):
            return None
        return 401, "open the URL with ?token=... (printed when the dashboard started)"

    def _answer(self, head_only: bool) -> None:
        refused = self._refused()
        if refused is not None:
            status, why = refused
            if self.path.startswith("/api/"):  # JSON as every other API answer (a script read an HTML page)
                self._send(status, json.dumps({"error": why}), head_only, "application/json")
            else:
                self._send(status, f"<!doctype html><title>refused</title><p>{esc(why)}</p>", head_only)
            return
        if self.path.split("?")[0] == "/favicon.ico":
            self.send_response(HTTPStatus.NO_CONTENT)
            self.end_headers()
            return
        content_type = "text/html; charset=utf-8"
        try:
            if self.path.startswith("/api/"):
                status, body, content_type = render_api(self.server.store_path, self.path)
            else:
                status, body = render_path(self.server.store_path, self.path, self.server.catalog)
        except Exception as exc:  # a broken page must not kill the server; say what broke
            status, body = (
                500,
                f"<!doctype html><title>error</title><p>error: {esc(type(exc).__name__)}: {esc(exc)}</p>",
            )
            sys.stderr.write(f"dashboard: {self.path}: {type(exc).__name__}: {exc}\n")  # always say what broke
        self._send(status, body, head_only, content_type)

    def do_GET(self) -> None:
        self._answer(head_only=False)

    def do_HEAD(self) -> None:
        self._answer(head_only=True)

    def _read_only(self) -> None:
        self._send(405, "<!doctype html><title>read-only</title><p>The dashboard is read-only.</p>")

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_TRACE = do_CONNECT = _read_only

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        if code == HTTPStatus.NOT_IMPLEMENTED:  # a method with no do_ handler (PROPFIND, lowercase get): read-only
            self._read_only()
            return
        super().send_error(code, message, explain)

    def log_message(self, format: str, *args: object) -> None:
        if self.server.log is not None:
            self.server.log(format % args)


class DashboardServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self,
        store_path: Path,
        host: str,
        port: int,
        log: Callable[[str], None] | None = None,
        token: str | None = None,
        catalog: Catalog | None = None,
    ) -> None:
        self.store_path = store_path
        self.catalog = catalog
        self.log = log
        self.token = token
        self.allowed = allowed_hosts(host)
        super().__init__((host, port), _Handler)

    @property
    def base_url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host if isinstance(host, str) else host.decode()}:{port}"


def make_server(
    store_path: str | Path | None,
    host: str = "127.0.0.1",
    port: int = 0,
    log: Callable[[str], None] | None = None,
    token: str | None = None,
    catalog: Catalog | None = None,
) -> DashboardServer:
    """A bound server over an existing store (port 0: a free port). The store is never created here.
    ``catalog`` (loaded once by the caller, e.g. with the user's ``--catalog``) prices measured points."""
    from rightsize.store import Store
    from rightsize.store.opening import default_store_path, missing_store_error

    path = Path(store_path) if store_path is not None else default_store_path()
    if not path.is_file():  # a directory is named as one: the fix is a file path, not a first run
        raise missing_store_error(path)
    Store(path, read_only=True).close()  # a file that is not a store, or a damaged one, is refused before serving
    check_host(host)
    try:
        return DashboardServer(path, host, port, log, token, catalog)
    except OSError as exc:
        if (error := host_error(exc, host)) is not None:
            raise error from None
        raise RightsizeError(f"--port: cannot listen on {host}:{port} ({exc.strerror}); pick another port") from None


@contextmanager
def running_dashboard(
    store_path: str | Path,
    host: str = "127.0.0.1",
    port: int = 0,
    token: str | None = None,
    catalog: Catalog | None = None,
) -> Iterator[str]:
    """Serve the dashboard in a background thread; yields its base URL and stops it on exit."""
    server = make_server(store_path, host, port, token=token, catalog=catalog)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        yield server.base_url
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def serve_dashboard(
    store_path: str | Path | None,
    host: str = "127.0.0.1",
    port: int = 8765,
    on_ready: Callable[[str], None] | None = None,
    log: Callable[[str], None] | None = None,
    token: str | None = None,
    catalog: Catalog | None = None,
) -> None:
    """Serve until interrupted (Ctrl-C)."""
    server = make_server(store_path, host, port, log, token, catalog)
    if on_ready is not None:
        on_ready(server.base_url)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
