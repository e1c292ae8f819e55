"""A simulated level is steady or growing: a decode-bound queue shows up in TPOT, not TTFT."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from rightsize.llm import sizing
from rightsize.llm.costs import StepCosts
from rightsize.llm.sim import LLMSimConfig, LLMSimResult
from rightsize.spec.targets import GenerativeTarget

TARGET = GenerativeTarget.model_validate({"rate_per_s": 2.0, "prompt_tokens": 256, "output_tokens": 101,
                                          "ttft": {"percentile": 95, "bound_ms": 3000},
                                          "tpot": {"percentile": 50, "bound_ms": 150}})  # fmt: skip


def _result(tpot_first: float, tpot_last: float, busy: float = 1.0) -> LLMSimResult:
    """600 requests 500 ms apart, each first token 100 ms after its arrival (TTFT flat), TPOT rising linearly."""
    n = 600
    arrival = np.arange(n, dtype=np.float64) * 500.0
    first = arrival + 100.0
    outputs = np.full(n, 101, dtype=np.int64)
    finish = first + 100 * np.linspace(tpot_first, tpot_last, n)
    empty: dict[str, float] = {}
    return LLMSimResult(ttft_ms=empty, tpot_ms=empty, e2e_ms=empty, throughput_tokens_s=0.0, throughput_rps=0.0,
                        mean_running=0.0, busy_fraction=busy, device_share=1.0, compute_share=0.0, preemptions=0,
                        rejected=0, too_long=0, n_recorded=n - 60, iterations=0, arrival_ms=arrival,
                        prompt_tokens=np.full(n, 256), output_tokens=outputs, first_token_ms=first, finish_ms=finish,
                        preempted=np.zeros(n, dtype=np.int64), recorded=np.arange(n) >= 60)  # fmt: skip


def _level(res: LLMSimResult, monkeypatch: pytest.MonkeyPatch) -> sizing.Level:
    def fake(*args: Any, **kw: Any) -> LLMSimResult:
        return res

    monkeypatch.setattr(sizing, "simulate_llm", fake)
    lengths = np.full(600, 256)
    return sizing.level(StepCosts(0, 0, 0, 0, 0, 0), LLMSimConfig(), 2.0, lengths, lengths, TARGET, 0)


def test_a_running_set_that_grows_under_a_flat_ttft_is_not_steady(monkeypatch: pytest.MonkeyPatch) -> None:
    """Decode the bottleneck (llama-1b int8 on one r7i.2xlarge at 2 req/s): TTFT flat, TPOT p50 104 ms over 600
    requests and 135 over 6000, because each step carries more sequences as the run goes on. Only TTFT was compared
    between the first and last fifth, so the level read steady and met TPOT <= 150 on an optimistic figure."""
    lv = _level(_result(30.0, 120.0), monkeypatch)
    assert lv.tpot_ms < TARGET.tpot.bound_ms and lv.ttft_ms == pytest.approx(100.0)  # within both bounds...
    assert lv.growing and not lv.meets  # ...but the last fifth's TPOT is past twice the first's: not steady


def test_a_steady_tpot_or_an_idle_replica_is_not_read_as_growing(monkeypatch: pytest.MonkeyPatch) -> None:
    steady = _level(_result(40.0, 60.0), monkeypatch)  # last fifth / first fifth ~1.4
    assert steady.meets and not steady.growing
    idle = _level(_result(30.0, 120.0, busy=0.5), monkeypatch)  # a replica half idle has no queue to grow
    assert idle.meets and not idle.growing
