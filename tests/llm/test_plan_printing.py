"""How a generative plan's rows are ranked and printed: the tensor-parallel tie-break, a CPU row's tp, a plan with
one output token a request (no TPOT)."""

from __future__ import annotations

import numpy as np

from rightsize.llm.plan import LLMCandidate, LLMPlan, _rank
from rightsize.llm.plan_result import NO_TPOT


def _row(instance: str, tp: int, device_class: str = "gpu", ttft_ms: float = 45.8) -> LLMCandidate:
    return LLMCandidate(provider="aws", region="us-east-1", instance=instance, device="H100" if device_class == "gpu"
                        else "intel-sapphire-rapids", device_class=device_class, tp=tp, replicas=1, instances=1,
                        usd_per_hour=55.04, kv_tokens=1000, ttft_ms=ttft_ms, tpot_ms=25.7, output_tokens_per_s=800.0,
                        usd_per_m_output_tokens=19.11, meets=True)  # fmt: skip


def test_equal_tensor_parallel_options_rank_the_fewest_gpus_first() -> None:
    """engine: eager put every step of p5.48xlarge at tp 2, 4 and 8 on the host floor (one price, one TTFT): the
    row kept was whichever tp the candidates listed first, not the fewest GPUs per replica."""
    plan = LLMPlan([_row("p5.48xlarge", 8), _row("p5.48xlarge", 4), _row("p5.48xlarge", 2)], [])
    _rank(plan, "on_demand")
    assert [c.tp for c in plan.candidates] == [2, 4, 8]
    # a lower TTFT at the same price still wins over fewer GPUs (p4d.24xlarge: tp 8 46 ms, tp 4 56 ms)
    plan = LLMPlan([_row("p4d.24xlarge", 4, ttft_ms=56.3), _row("p4d.24xlarge", 8, ttft_ms=45.8)], [])
    _rank(plan, "on_demand")
    assert [c.tp for c in plan.candidates] == [8, 4]


def test_a_cpu_row_has_no_tensor_parallel_degree_in_words_or_json() -> None:
    """A CPU replica (all its cores) printed "tp 1" in the table and the report and "tp": 1 in --json."""
    cpu, gpu = _row("c7i.48xlarge", 1, "cpu"), _row("p5.4xlarge", 1)
    assert cpu.tp_words() == "-" and gpu.tp_words() == "1"
    assert cpu.to_dict()["tp"] is None and gpu.to_dict()["tp"] == 1
    state = LLMPlan([cpu, gpu], []).state()  # the store's state keeps the 1 (the energy arithmetic counts by it)
    assert state["candidates"][0]["tp"] == 1
    again = LLMPlan.from_state(state)
    assert again.candidates == [cpu, gpu] and again.candidates[0].tp_words() == "-"


def test_one_output_token_a_request_has_no_tpot_to_print() -> None:
    """output_tokens: 1 printed "TPOT p50 0.0 ms" as if TPOT were judged."""
    one = LLMPlan([], [], outputs=np.ones(8, dtype=np.int64))
    assert not one.judges_tpot and one.tpot_words(0.0) == NO_TPOT == "n/a (1 output token)"
    assert one.tpot_words(0.0, cell=True) == "n/a"
    some = LLMPlan([], [], outputs=np.array([1, 64]))
    assert some.judges_tpot and some.tpot_words(58.94) == "58.9 ms" == some.tpot_words(58.94, cell=True)
    assert LLMPlan([], []).judges_tpot  # a plan without its lengths (none stored) prints what it has


def test_a_reason_without_tpot_still_ranks_by_how_far_it_misses() -> None:
    """With one output token a request the reasons state TTFT alone ("... (bound 2000)"); the nearest miss is shown
    first, as when they carried a TPOT."""
    far = ("c7a.8xlarge", "one request alone: TTFT p95 2619 ms (bound 2000)")
    near = ("m7i.4xlarge", "one request alone: TTFT p95 2100 ms (bound 2000)")
    both = ("c7i.12xlarge", "one request alone: TTFT p95 846 ms (bound 2000), TPOT p50 92.6 ms (bound 60)")
    assert LLMPlan([], [far, both, near]).infeasible_by_interest() == [near, far, both]
