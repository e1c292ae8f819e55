"""The continuous-batching simulator: hand-checked cases, a literal reference of the engine's policy,
queueing identities and the load behaviour."""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass

import numpy as np
import pytest

from rightsize.errors import SpecError
from rightsize.llm import sim
from rightsize.llm.costs import StepCosts
from rightsize.llm.sim import LLMSimConfig, simulate_llm

COSTS = StepCosts(p0=5.0, p1=0.02, p2=1e-5, d0=10.0, d1=0.2, d2=0.001)
FLAT = StepCosts(p0=5.0, p1=0.0, p2=0.0, d0=10.0, d1=0.0, d2=0.0)  # prefill 5 ms, decode 10 ms


@dataclass(eq=False)
class _Req:
    i: int
    prompt: int
    out: int
    gen: int = 0
    blocks: int = 0
    cache: int = 0  # tokens in the KV cache
    first: float = math.nan
    finish: float = math.nan


def _reference(
    arr: np.ndarray, prompts: np.ndarray, outs: np.ndarray, costs: StepCosts, cfg: LLMSimConfig
) -> tuple[np.ndarray, np.ndarray, int]:
    """rightsize.llm.engine's scheduling, transcribed object by object (slow, obviously right)."""
    reqs = [_Req(i, int(p), int(o)) for i, (p, o) in enumerate(zip(prompts, outs, strict=True))]
    free, now, nxt, preemptions = cfg.kv_tokens // 16, float(arr[0]), 0, 0
    waiting: deque[_Req] = deque()
    running: list[_Req] = []
    while nxt < len(reqs) or waiting or running:
        if not waiting and not running and arr[nxt] > now:
            now = float(arr[nxt])
        while nxt < len(reqs) and arr[nxt] <= now:
            waiting.append(reqs[nxt])
            nxt += 1
        admitted = []
        while waiting and len(running) < cfg.max_seqs:
            r = waiting[0]
            need = -(-(r.prompt + r.gen + 1) // 16)
            if need > free:
                break
            waiting.popleft()
            free -= need
            r.blocks = need
            running.append(r)
            admitted.append(r)
        if admitted:
            for r in admitted:
                now += costs.prefill_ms(r.prompt + r.gen)
                r.cache = r.prompt + r.gen
                r.gen += 1
                if r.gen == 1:
                    r.first = now
                if r.gen == r.out:
                    r.finish = now
                    running.remove(r)
                    free += r.blocks
            continue
        for r in list(running):
            if r not in running or r.blocks * 16 >= r.cache + 1:
                continue
            while free == 0 and r in running:
                v = running.pop()
                free += v.blocks
                waiting.appendleft(v)
                preemptions += 1
            if r in running:
                r.blocks += 1
                free -= 1
        now += costs.decode_ms(len(running), sum(r.cache + 1 for r in running))
        for r in list(running):
            r.cache += 1
            r.gen += 1
            if r.gen == r.out:
                r.finish = now
                running.remove(r)
                free += r.blocks
    return np.array([r.first for r in reqs]), np.array([r.finish for r in reqs]), preemptions


def test_one_request_by_hand() -> None:
    p, out = 100, 5
    res = simulate_llm(COSTS, LLMSimConfig(), arrivals_ms=[3.0], prompt_tokens=p, output_tokens=out, warmup=0)
    assert res.ttft_ms["p50"] == pytest.approx(COSTS.prefill_ms(p))
    # Decode step j attends the prompt + j + 1 tokens (cache + the token being decoded).
    steps = [COSTS.decode_ms(1, p + 1 + j) for j in range(out - 1)]
    assert res.tpot_ms["p50"] == pytest.approx(sum(steps) / (out - 1))
    assert res.e2e_ms["mean"] == pytest.approx(COSTS.prefill_ms(p) + sum(steps))
    assert res.iterations == out and res.preemptions == 0


def test_two_simultaneous_requests_share_prefill_and_decode() -> None:
    res = simulate_llm(FLAT, LLMSimConfig(), arrivals_ms=[0.0, 0.0], prompt_tokens=[10, 20], output_tokens=3)
    # One prefill iteration, one sequence after the other; each token right after its own prefill.
    assert res.first_token_ms.tolist() == [5.0, 10.0]
    assert res.finish_ms.tolist() == [30.0, 30.0]  # two shared decode steps of 10 ms
    assert res.tpot.tolist() == [12.5, 10.0]


def test_max_seqs_delays_the_third() -> None:
    res = simulate_llm(FLAT, LLMSimConfig(max_seqs=2), arrivals_ms=[0.0] * 3, prompt_tokens=10, output_tokens=3)
    assert res.first_token_ms.tolist() == [5.0, 10.0, 35.0]  # admitted once the first two finish at 30
    assert res.finish_ms.tolist() == [30.0, 30.0, 55.0]


def test_kv_exhaustion_preempts_and_everyone_finishes() -> None:
    rng = np.random.default_rng(7)
    n = 300
    arr = np.sort(rng.uniform(0, 20_000, n))
    prompts, outs = rng.integers(20, 200, n), rng.integers(20, 300, n)
    cfg = LLMSimConfig(max_seqs=32, kv_tokens=1024)  # ~4 average requests of KV for 32 slots
    res = simulate_llm(COSTS, cfg, arrivals_ms=arr, prompt_tokens=prompts, output_tokens=outs, warmup=0)
    assert res.preemptions > 10
    assert np.all(np.isfinite(res.finish_ms)) and res.preempted.sum() == res.preemptions
    first, finish, preemptions = _reference(arr, prompts, outs, COSTS, cfg)
    assert preemptions == res.preemptions
    np.testing.assert_allclose(res.first_token_ms, first, rtol=1e-9)
    np.testing.assert_allclose(res.finish_ms, finish, rtol=1e-9)


@pytest.mark.parametrize("block_edge", [True, False])
def test_matches_the_reference_policy(block_edge: bool) -> None:
    """Random loads, including prompts of exactly 16k tokens (a block full at admission)."""
    rng = np.random.default_rng(11 + block_edge)
    n = 400
    arr = np.cumsum(rng.exponential(60.0, n))
    prompts = 16 * rng.integers(1, 12, n) if block_edge else rng.integers(1, 300, n)
    outs = rng.integers(1, 200, n)
    cfg = LLMSimConfig(max_seqs=12, kv_tokens=16 * 90)
    res = simulate_llm(COSTS, cfg, arrivals_ms=arr, prompt_tokens=prompts, output_tokens=outs)
    first, finish, preemptions = _reference(arr, prompts, outs, COSTS, cfg)
    assert preemptions == res.preemptions
    np.testing.assert_allclose(res.first_token_ms, first, rtol=1e-9)
    np.testing.assert_allclose(res.finish_ms, finish, rtol=1e-9)


def test_fast_path_equals_single_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    def run() -> sim.LLMSimResult:
        cfg = LLMSimConfig(max_seqs=8, kv_tokens=2048)
        return simulate_llm(COSTS, cfg, rate_per_s=1.0, n_requests=300, prompt_tokens=(10, 600),
                            output_tokens=(50, 400), service_noise=0.3)  # fmt: skip

    fast = run()
    monkeypatch.setattr(sim, "FAST_MIN_STEPS", 10**9)
    slow = run()
    assert fast.iterations == slow.iterations and fast.preemptions == slow.preemptions
    np.testing.assert_allclose(fast.finish_ms, slow.finish_ms, rtol=1e-9)
    for a, b in ((fast.mean_running, slow.mean_running), (fast.busy_fraction, slow.busy_fraction)):
        assert a == pytest.approx(b, rel=1e-9)
    assert fast.throughput_tokens_s == pytest.approx(slow.throughput_tokens_s, rel=1e-9)


def test_littles_law() -> None:
    """Mean running sequences = request throughput x mean time in the system (queueing here is brief)."""
    res = simulate_llm(
        COSTS, LLMSimConfig(max_seqs=64, kv_tokens=100_000), rate_per_s=4.0, n_requests=6000,
        prompt_tokens=(50, 500), output_tokens=(20, 300), seed=5,
    )  # fmt: skip
    assert res.mean_running == pytest.approx(res.throughput_rps * res.e2e_ms["mean"] / 1e3, rel=0.05)
    assert res.throughput_tokens_s == pytest.approx(res.throughput_rps * res.output_tokens.mean(), rel=0.05)
    assert 0.9 < res.busy_fraction <= 1.0  # continuous batching: hardly ever idle at ~14 running


def test_ttft_tail_rises_with_load() -> None:
    cfg = LLMSimConfig(max_seqs=32, kv_tokens=20_000)
    p95 = [
        simulate_llm(
            COSTS, cfg, rate_per_s=r, n_requests=3000, prompt_tokens=(50, 500), output_tokens=(20, 200)
        ).ttft_ms["p95"]
        for r in (1.0, 4.0, 8.0, 12.0)
    ]
    assert p95 == sorted(p95) and p95[-1] > 3 * p95[0]


def test_queue_limit_rejects_and_too_long_is_refused() -> None:
    cfg = LLMSimConfig(max_seqs=4, kv_tokens=4096, max_queue=3)
    res = simulate_llm(FLAT, cfg, arrivals_ms=[0.0] * 10, prompt_tokens=10, output_tokens=5, warmup=0)
    assert res.rejected == 7 and res.n_recorded == 3
    lengths = [10, 5000, 10]  # 5000 + 5 tokens can never fit in 4096
    res = simulate_llm(FLAT, cfg, arrivals_ms=[0.0, 1.0, 2.0], prompt_tokens=lengths, output_tokens=5, warmup=0)
    assert res.too_long == 1 and res.n_recorded == 2


def test_record_from_and_inputs() -> None:
    res = simulate_llm(FLAT, LLMSimConfig(), arrivals_ms=np.arange(10) * 1000.0, prompt_tokens=10, output_tokens=2,
                       record_from_ms=4000.0)  # fmt: skip
    assert res.n_recorded == 6 and res.recorded.tolist() == [False] * 4 + [True] * 6
    with pytest.raises(SpecError, match="one per request"):
        simulate_llm(FLAT, LLMSimConfig(), arrivals_ms=[0.0, 1.0], prompt_tokens=[1, 2, 3])
    with pytest.raises(SpecError, match="sorted"):
        simulate_llm(FLAT, LLMSimConfig(), arrivals_ms=[1.0, 0.0])
    with pytest.raises(SpecError, match="rate_per_s"):
        simulate_llm(FLAT, LLMSimConfig())


@pytest.mark.slow  # ~1 s on 2 cores: kept out of make test-fast
def test_ten_thousand_requests_are_fast() -> None:
    t0 = time.perf_counter()
    res = simulate_llm(
        COSTS, LLMSimConfig(max_seqs=64, kv_tokens=50_000), rate_per_s=1.0, n_requests=10_000,
        prompt_tokens=(64, 1024), output_tokens=(32, 512), service_noise=0.1,
    )  # fmt: skip
    elapsed = time.perf_counter() - t0
    assert res.n_recorded == 9000 and res.iterations > 500_000
    assert elapsed < 5.0  # ~0.45 s on the 2-core dev box (1.0 s without the fast path); catches a regression


def test_the_simulator_splits_busy_time_into_device_and_compute_bound_work() -> None:
    # a roofline replica (floors set): long prompts and one token each are prefill, compute-bound; short prompts
    # with long outputs are decode, memory-bound; an eager host floor above the GPU's step leaves the GPU idle part
    from rightsize.catalog import load_catalog
    from rightsize.llm.costs import project_step_costs
    from rightsize.llm.shape import DecoderShape

    h100, shape = load_catalog().accelerators["H100"], DecoderShape.from_zoo("llama-7b")
    graphs = project_step_costs(shape, h100, "fp16")
    eager = project_step_costs(shape, h100, "fp16", engine="eager")
    kw = {"arrivals_ms": [0.0] * 8, "warmup": 0.0}
    pre = simulate_llm(graphs, LLMSimConfig(), prompt_tokens=2048, output_tokens=1, **kw)  # type: ignore[arg-type]
    dec = simulate_llm(graphs, LLMSimConfig(), prompt_tokens=16, output_tokens=256, **kw)  # type: ignore[arg-type]
    host = simulate_llm(eager, LLMSimConfig(), prompt_tokens=16, output_tokens=256, **kw)  # type: ignore[arg-type]
    assert pre.compute_share > 0.95 and pre.device_share == pytest.approx(1.0)
    assert dec.compute_share < 0.05 and dec.device_share == pytest.approx(1.0)
    step, device, _ = eager.decode_split(8, 8 * 150)
    assert device < step  # host-bound
    assert host.device_share == pytest.approx(device / step, rel=0.1)
