"""Which Host header values a local server answers (DNS-rebinding defence), shared by the model
server (``serve/guard.py``) and the dashboard (``report/dashboard.py``).

    allowed_hosts("127.0.0.1")     # {b"127.0.0.1", b"localhost", b"[::1]"}; None for a public bind
    host_name(b"localhost:8000")   # b"localhost"
"""

from __future__ import annotations

import ipaddress

__all__ = ["allowed_hosts", "check_host", "host_name", "is_loopback"]


def check_host(host: str) -> None:
    """Refuse an empty --host: the socket layer reads it as every interface (the store, or the model, open to the
    network; an unset ``$HOST`` had exposed the model server)."""
    from rightsize.errors import SpecError

    if not host.strip():
        raise SpecError("--host", "is empty (which would listen on every interface); give 127.0.0.1, or the "
                        "address of one interface")  # fmt: skip


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
