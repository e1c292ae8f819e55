"""Which Host header values a local server answers (DNS-rebinding defence), shared by the model
server (``serve/guard.py``) and the dashboard (``report/dashboard.py``).

    allowed_hosts("127.0.0.1")     # {b"127.0.0.1", b"localhost", b"[::1]"}; None for a public bind
    host_name(b"localhost:8000")   # b"localhost"
    check_listenable("10.0.0.7")   # SpecError naming --host when this machine cannot listen there
"""

from __future__ import annotations

import errno
import ipaddress
import socket

from rightsize.errors import SpecError

__all__ = ["allowed_hosts", "check_host", "check_listenable", "host_error", "host_name", "is_loopback"]


def check_host(host: str) -> None:
    """Refuse an empty --host: the socket layer reads it as every interface (the store, or the model, open to the
    network; an unset ``$HOST`` had exposed the model server)."""
    if not host.strip():
        raise SpecError("--host", "is empty (which would listen on every interface); give 127.0.0.1, or the "
                        "address of one interface")  # fmt: skip


def host_error(exc: OSError, host: str) -> SpecError | None:
    """The --host error for a bind that failed because of the host: not an address or a name this machine resolves
    (gaierror), or not one of its addresses; None when it is the port's fault (taken, privileged)."""
    if isinstance(exc, socket.gaierror) or exc.errno == errno.EADDRNOTAVAIL:
        return SpecError("--host", f"cannot listen on {host!r} ({exc.strerror}); give an address of this machine, "
                         "e.g. 127.0.0.1")  # fmt: skip
    return None


def check_listenable(host: str) -> None:
    """``check_host``, and refuse an address this machine cannot listen on, by binding a free port there once:
    before a warning about who can reach it (`dashboard --host 999.999.1.1` warned that it exposed the store, then
    failed) or a model loads. The server binds its own port after."""
    check_host(host)
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, 0))
        except OSError as exc:
            if (error := host_error(exc, host)) is not None:
                raise error from None
            # any other failure is the real bind's to report, with the port


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def allowed_hosts(bind_host: str) -> frozenset[bytes] | None:
    """Host names (any port) a server bound to ``bind_host`` accepts (None: any, for non-loopback
    binds, where the names clients use are not known here; protect those with a token)."""
    if not is_loopback(bind_host):
        return None
    return frozenset({b"127.0.0.1", b"localhost", b"[::1]"})


def host_name(header: bytes) -> bytes:
    """``b"127.0.0.1:8000"`` -> ``b"127.0.0.1"``; ``b"[::1]:80"`` -> ``b"[::1]"``."""
    header = header.strip().lower()
    if header.startswith(b"["):
        return header[: header.find(b"]") + 1] if b"]" in header else header
    return header.split(b":", 1)[0]
