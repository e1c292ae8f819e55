"""``rightsize dashboard``: serve the results store read-only on 127.0.0.1 (runs, comparisons, latency vs cost)."""

from __future__ import annotations

import secrets
from pathlib import Path

import typer

from rightsize.cli._common import (
    CATALOG_OPTION,
    JSON_OPTION,
    STORE_OPTION,
    check_token,
    emit_json,
    err_console,
    load_catalog_option,
)

_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def dashboard(
    store: Path | None = STORE_OPTION,
    host: str = typer.Option(
        "127.0.0.1", "--host", help="Interface to listen on (keep it local: the store is not public)."
    ),
    port: int = typer.Option(8765, "--port", min=0, max=65535, help="Port (0: a free port)."),
    json_out: bool = JSON_OPTION,
    verbose: bool = typer.Option(False, "--verbose", help="Log every request on stderr."),
    token: str | None = typer.Option(
        None,
        "--token",
        envvar="RIGHTSIZE_DASHBOARD_TOKEN",
        help="Require this token (open the printed URL once; a cookie keeps it). Default: none on loopback, "
        "a random one on any other --host.",
    ),
    catalog: list[Path] | None = CATALOG_OPTION,
) -> None:
    """Serve a local, read-only dashboard over the results store until Ctrl-C."""
    from rightsize.hosts import check_listenable
    from rightsize.report.dashboard import serve_dashboard

    check_listenable(host)  # before the warning below: an address it cannot listen on exposes nothing
    check_token(token)
    if host not in _LOOPBACK:
        err_console.print(f"warning: --host {host} exposes the results store beyond this machine")
        token = token or secrets.token_urlsafe(16)

    def ready(url: str) -> None:
        if token:
            url = f"{url}/?token={token}"
        if json_out:  # one line, flushed: a caller reads it while the server keeps running
            emit_json({"url": url}, one_line=True)
        else:
            err_console.print(f"rightsize dashboard on {url}  (Ctrl-C stops it)")

    def log(line: str) -> None:
        err_console.print(line, highlight=False)

    try:
        serve_dashboard(
            store, host=host, port=port, on_ready=ready, log=log if verbose else None, token=token,
            catalog=load_catalog_option(catalog),
        )  # fmt: skip
    except KeyboardInterrupt:
        from rightsize.errors import print_stop

        print_stop("stopped")
        raise typer.Exit(130) from None  # Ctrl-C, as `serve` and every other command exit (README: exit codes)


def register(app: typer.Typer) -> None:
    app.command("dashboard")(dashboard)
