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
    return sizing.level(StepCosts(0, 0, 0, 0, 0, 0), LLMSimConfig(), 2.0, 1, lengths, lengths, TARGET, 0)


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


def test_a_replica_gets_every_rth_request_of_the_fleets_poisson_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    """Round-robin routing: one replica of 4 at 2 req/s sees the 4th, 8th, ... arrival of one Poisson stream at
    2 req/s (Erlang-4 gaps, mean 2 s, CV 1/2), not its own Poisson stream at 0.5 req/s (CV 1: random routing)."""
    from rightsize.plan.arrivals import arrival_times_ms

    seen: dict[str, Any] = {}

    def fake(*args: Any, **kw: Any) -> LLMSimResult:
        seen.update(kw)
        return _result(40.0, 40.0)

    monkeypatch.setattr(sizing, "simulate_llm", fake)
    lengths = np.full(600, 256)
    sizing.level(StepCosts(0, 0, 0, 0, 0, 0), LLMSimConfig(), 2.0, 4, lengths, lengths, TARGET, 7)
    got = seen["arrivals_ms"]
    fleet = arrival_times_ms(np.random.default_rng(7), 2400, 2.0)[0]
    assert got.size == 600 and np.array_equal(got, fleet[3::4])  # deterministic in the seed
    gaps = np.diff(got)
    assert gaps.mean() == pytest.approx(2000.0, rel=0.1) and gaps.std() / gaps.mean() == pytest.approx(0.5, abs=0.06)
    assert seen.get("rate_per_s") is None  # no Poisson stream of its own
    sizing.level(StepCosts(0, 0, 0, 0, 0, 0), LLMSimConfig(), 2.0, 1, lengths, lengths, TARGET, 7)
    assert np.array_equal(seen["arrivals_ms"], fleet[:600])  # one replica: the fleet's stream, as before


def test_a_replica_holding_three_long_requests_is_sized_for_round_robin_not_random_routing() -> None:
    """llama-7b at 1 req/s, 3,500-token prompts and 500-token answers, TTFT p95 <= 5 s, TPOT p50 <= 80 ms: a
    g5.xlarge replica holds 3 such requests (13,626 KV tokens) and each holds its slot ~24 s (24 busy on average).
    Each replica drawing its own Poisson stream (random routing) planned 30 replicas at 50% busy; round-robin: 12."""
    from rightsize.catalog import load_catalog
    from rightsize.llm.plan import plan_generative
    from rightsize.llm.shape import DecoderShape

    t = GenerativeTarget.model_validate({"rate_per_s": 1.0, "prompt_tokens": 3500, "output_tokens": 500,
                                         "ttft": {"percentile": 95, "bound_ms": 5000},
                                         "tpot": {"percentile": 50, "bound_ms": 80}})  # fmt: skip
    plan = plan_generative(DecoderShape.from_zoo("llama-7b"), t, load_catalog(), instances=["g5.xlarge"])
    rec = plan.recommendation
    assert rec is not None and rec.kv_tokens == 13_626
    assert rec.replicas == 12 and rec.ttft_ms == pytest.approx(3853, abs=5) and rec.busy > 0.95
    assert "replicas sized under round-robin routing (each replica gets every R-th request" in plan.notes[0]
