"""Fixtures for serving tests: a real uvicorn server on 127.0.0.1 (helpers live in serve_helpers.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rightsize.serve import ServerConfig, running_server


@pytest.fixture(scope="module")
def simplenet_url() -> Iterator[str]:
    # batching and the API, not admission: a burst of 48 on one worker of a busy 2-core VM can queue past the
    # default two batch times and be answered 503 (test_overload.py checks that policy on its own server)
    config = ServerConfig(model="simplenet", tiny=True, port=0, max_batch=8, max_wait_ms=10.0, max_body_bytes=65536,
                          max_queue_batches=0.0)  # fmt: skip
    with running_server(config) as url:
        yield url
