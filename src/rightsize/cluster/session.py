"""Connect to a Ray cluster, or start a local one on 127.0.0.1 — the only module that calls ``ray.init``.

    with ray_session("auto") as info:      # a running cluster if one exists, else a local one
        ...                                # info.started_local: we started it (and stop it on exit)

While a session is open, file descriptor 1 points at stderr: Ray's processes (and Ray itself) print
to stdout, which would break ``--json`` output; JSON is written after the session closes. An address
that nothing listens on fails in seconds (a TCP probe before ``ray.init``), not after Ray's minutes of
retries.

Loopback clusters: Ray rewrites ``127.0.0.1`` in an address to the machine's outward IP
(``ray._private.services.resolve_ip_for_localhost``), which cannot reach a cluster whose nodes were
started with ``--node-ip-address=127.0.0.1``. For a loopback target (and for the local cluster we
start) we switch that rewrite off, so every connection stays on 127.0.0.1 (see docs/cluster.md).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from rightsize.errors import RunFailedError, SpecError, UnsupportedError

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
LOCAL_OBJECT_STORE_BYTES = 512 * 1024**2  # object store of a local cluster we start (Ray's default is 30% of RAM)
CONNECT_TIMEOUT_S = 5.0  # a cluster address must accept a TCP connection within this
_LOCALHOST_REWRITE_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"  # "0" = do not rewrite 127.0.0.1 (ray_constants)


@dataclass(frozen=True)
class SessionInfo:
    address: str | None  # the cluster we joined; None for a local cluster we started
    started_local: bool  # we started a local cluster (it stops when the session ends)
    reused: bool  # ray was already initialised by the caller (left as it was)
    note: str | None = None  # e.g. "auto" found a cluster it could not join and started a local one


def import_ray() -> Any:
    """``ray``, or an UnsupportedError that says how to install it."""
    try:
        import ray
    except ImportError:
        raise UnsupportedError("--ray: Ray is not installed; pip install 'rightsize[ray]' (or drop --ray)") from None
    return ray


def host_of(address: str) -> str:
    """``"127.0.0.1:6379"`` -> ``"127.0.0.1"``; ``"ray://h:10001"`` -> ``"h"``; ``"[::1]:6379"`` -> ``"::1"``."""
    rest = address.split("://", 1)[-1]
    if rest.startswith("["):
        return rest[1 : rest.index("]")]
    return rest.rsplit(":", 1)[0] if rest.count(":") == 1 else rest


def is_loopback(address: str) -> bool:
    return host_of(address) in LOOPBACK_HOSTS


def _keep_loopback(ray: Any) -> None:
    """Stop Ray from rewriting 127.0.0.1 to the outward IP (read at call time, so setting it works after import)."""
    os.environ[_LOCALHOST_REWRITE_ENV] = "0"  # inherited by the processes of a local cluster we start
    from ray._private import ray_constants

    ray_constants.ENABLE_RAY_CLUSTER = False


def find_running_cluster(ray: Any) -> str | None:
    """The cluster ``--ray auto`` joins: ``$RAY_ADDRESS``, else the one ``ray start`` recorded, if its GCS is alive.

    Ray's own "auto" also joins any raylet it finds running on the machine; we do not, so a
    throwaway cluster another program started with ``ray.init()`` is never joined by accident.
    """
    env = os.environ.get("RAY_ADDRESS")
    if env:
        return env
    try:
        from ray._private import services

        recorded = services.find_bootstrap_address(None)  # /tmp/ray/ray_current_cluster, written by `ray start`
        if not recorded:
            return None
        live = services.find_gcs_addresses()  # from the raylet processes running on this machine
        return str(recorded) if recorded in live else None  # a stale file must not make us wait for a dead GCS
    except Exception:  # private API moved: let ray.init(address="auto") decide
        return "auto"


def _quiet(ray: Any) -> dict[str, Any]:
    logging.getLogger("ray").setLevel(logging.WARNING)
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    return {"logging_level": logging.WARNING, "log_to_driver": False, "ignore_reinit_error": True}


def probe(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """RunFailedError unless something accepts a TCP connection at ``address`` (host:port); ``auto`` and ``local``
    are left to Ray; anything else without a port is a SpecError."""
    rest = address.split("://", 1)[-1]
    port_text = rest.rsplit(":", 1)[-1] if ":" in rest and not rest.endswith("]") else ""
    if address in ("auto", "local"):
        return
    if not port_text.isdigit() or not 0 < int(port_text) < 65536 or not host_of(address):
        # Ray's own answer is a ValueError traceback ("Invalid address format")
        raise SpecError("--ray", f"{address!r} is not a cluster address; pass auto, HOST:PORT (e.g. 127.0.0.1:6379) "
                        "or ray://HOST:PORT")  # fmt: skip
    host = host_of(address)
    try:
        with socket.create_connection((host, int(port_text)), timeout=timeout_s):
            return
    except OSError as exc:
        raise RunFailedError(
            f"--ray: nothing answers at {address!r} ({exc.strerror or exc}); start the cluster (`ray start --head`) "
            "or pass --ray auto"
        ) from None


@contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Point fd 1 at stderr for the block (what Ray and its child processes print stays off stdout)."""
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no stdout at all
        yield
        return
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


@contextmanager
def ray_session(
    address: str, *, object_store_memory_bytes: int | None = LOCAL_OBJECT_STORE_BYTES, num_cpus: int | None = None
) -> Iterator[SessionInfo]:
    """Join the cluster at ``address`` ("auto": a running one, else start a local one) for the block.

    A local cluster we start is stopped on exit; a cluster we joined is only disconnected from; a
    session the caller had already initialised is left untouched.
    """
    if not address:
        raise SpecError("--ray", "give 'auto' or a cluster address such as 127.0.0.1:6379")
    ray = import_ray()
    if ray.is_initialized():
        yield SessionInfo(address=None, started_local=False, reused=True)
        return
    if address != "auto":
        probe(address)
    with _stdout_to_stderr():
        yield from _session(ray, address, object_store_memory_bytes, num_cpus)


def _session(
    ray: Any, address: str, object_store_memory_bytes: int | None, num_cpus: int | None
) -> Iterator[SessionInfo]:
    kwargs = _quiet(ray)
    target = find_running_cluster(ray) if address == "auto" else address
    note = None
    on_term = signal.getsignal(signal.SIGTERM)  # ray.init installs its own: SIGTERM then dumped a crash report
    if target is not None:
        try:
            if is_loopback(target):
                _keep_loopback(ray)
            ray.init(address=target, **kwargs)
        except ConnectionError as exc:
            if address != "auto":
                raise RunFailedError(
                    f"--ray: cannot connect to a Ray cluster at {address!r} ({exc}); is it running?"
                ) from None
            note = f"--ray auto: could not join the Ray cluster at {target} ({exc}); started a local one instead"
            target = None
    if target is None:
        _keep_loopback(ray)
        ray.init(
            address="local", _node_ip_address="127.0.0.1", include_dashboard=False,
            object_store_memory=object_store_memory_bytes, num_cpus=num_cpus, **kwargs,
        )  # fmt: skip
    if on_term is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, on_term)  # stopped as Ctrl-C: exit 143, the output left as it was
    try:
        yield SessionInfo(address=target, started_local=target is None, reused=False, note=note)
    finally:
        ray.shutdown()
