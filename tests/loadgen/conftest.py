"""Fixtures of the load generator's tests: one tiny server process (lg_tiny_server) and a closed port."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from lg_tiny_server import TinyServer


@pytest.fixture(scope="session")
def _tiny_process() -> Iterator[TinyServer]:
    server = TinyServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def server(_tiny_process: TinyServer) -> TinyServer:
    """The shared test server with its request count at zero and no stall pending."""
    _tiny_process.stall(0, 0)
    _tiny_process.reset()
    return _tiny_process


@pytest.fixture
def closed_port() -> int:
    """A 127.0.0.1 port with nothing listening (bound then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
