"""The open-loop SSE client against the real generation server (tiny decoder): counts, times, failures."""

from __future__ import annotations

import math
import socket

import numpy as np

from rightsize.llm.engine import EngineConfig
from rightsize.llm.loadgen import run_generation_load
from rightsize.llm.server import running_generate_server


def test_every_request_streams_its_tokens_and_the_client_times_them() -> None:
    cfg = EngineConfig(model="gpt2", size="tiny", max_seqs=4, kv_tokens=1024)
    with running_generate_server(cfg) as url:
        offsets = np.linspace(0.0, 0.5, 8)
        res = run_generation_load(url, offsets, [8, 16, 24, 32] * 2, [5, 3, 9, 2] * 2)
    s = res.summary()
    assert s["sent"] == s["answered"] == 8 and s["statuses"] == {"200": 8} and s["valid"]
    assert [r.tokens for r in res.results] == [5, 3, 9, 2] * 2
    for r in res.results:
        assert r.sent_s >= r.intended_s - 1e-3  # never early
        assert 0 < r.ttft_ms < 10_000 and r.last_s >= r.first_s
        assert math.isfinite(r.tpot_ms) and r.tpot_ms >= 0
    assert s["ttft_ms"]["p50"] <= s["ttft_ms"]["p95"] and s["output_tokens_per_s"] > 0


def test_a_refused_connection_is_counted_not_raised() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again below: nothing listens there
    res = run_generation_load(f"http://127.0.0.1:{port}", [0.0, 0.01], [4, 4], [2, 2], timeout_s=5)
    s = res.summary()
    assert s["answered"] == 0 and s["statuses"] == {"0": 2} and not s["valid"]
    assert all("Error" in r.error for r in res.results)
