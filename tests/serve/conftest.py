"""Fixtures for serving tests: a real uvicorn server on 127.0.0.1 (helpers live in serve_helpers.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rightsize.serve import ServerConfig, running_server


@pytest.fixture(scope="module")
def simplenet_url() -> Iterator[str]:
    config = ServerConfig(model="simplenet", tiny=True, port=0, max_batch=8, max_wait_ms=10.0, max_body_bytes=65536)
    with running_server(config) as url:
        yield url
