"""Reading the server's batch log during a validation: a busy server that misses one read is asked again."""

from __future__ import annotations

import io
import json
import urllib.request
from typing import Any

import pytest

from rightsize.workflows import validate_run

LOG = {"fields": ["samples", "compute_ms", "busy_ms", "pool", "taken_ms"], "next": 2, "cpu_s": 1.5,
       "batches": [[1, 10.0, 11.0, "cpu", 0.1], [4, 30.0, 31.0, "cpu", 0.2]]}  # fmt: skip


class _Resp(io.BytesIO):
    def __enter__(self) -> _Resp:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _flaky(failures: int) -> tuple[Any, list[float]]:
    calls: list[float] = []

    def urlopen(req: Any, timeout: float) -> _Resp:
        calls.append(timeout)
        if len(calls) <= failures:
            raise TimeoutError("timed out")  # an OSError: a server too busy to answer in time
        return _Resp(json.dumps(LOG).encode())

    return urlopen, calls


def test_a_missed_read_is_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("time.sleep", lambda s: None)
    urlopen, calls = _flaky(failures=2)
    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    got = validate_run.served_batches("http://127.0.0.1:1", 0)
    assert got is not None and got.next == 2 and [n for n, _, _ in got.batches] == [1, 4] and len(calls) == 3
    urlopen, calls = _flaky(failures=5)
    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    assert validate_run.served_batches("http://127.0.0.1:1", 0) is None and len(calls) == 3  # gives up after 3
