"""Which replica each generative plan row carries, and firming it up on other draws of its simulation."""

from __future__ import annotations

import numpy as np
import pytest

from rightsize.catalog import load_catalog
from rightsize.catalog.model import Catalog
from rightsize.llm import sizing
from rightsize.llm.costs import StepCosts
from rightsize.llm.plan import plan_generative
from rightsize.llm.shape import DecoderShape
from rightsize.llm.sim import LLMSimConfig
from rightsize.llm.sizing import Level
from rightsize.spec.targets import GenerativeTarget


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


def _int4_at_5(**kw: object) -> GenerativeTarget:
    return GenerativeTarget.model_validate({"rate_per_s": 5.0, "prompt_tokens": {"uniform": [200, 800]},
                                            "output_tokens": {"uniform": [64, 256]}, "weight_precision": "int4",
                                            "ttft": {"percentile": 95, "bound_ms": 2000},
                                            "tpot": {"percentile": 50, "bound_ms": 60}} | kw)  # fmt: skip


def test_every_row_sharing_a_replica_is_firmed_up_and_the_cpu_alternative_too(
    catalog: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One draw of the simulation (seed 0) serves 2.5 req/s a replica, the other draws 1.7: every replica is sized at
    2 and must be firmed up to 3. Only the recommendation's row was: g5.2xlarge (the same A10G replica as g5.xlarge)
    stayed at 2 x $1.21 and ranked first, and the CPU rows were never re-checked."""

    def fake(costs: StepCosts, cfg: LLMSimConfig, rate: float, replicas: int, prompts: np.ndarray,
             outputs: np.ndarray, target: GenerativeTarget, seed: int, alone: bool = False) -> Level:  # fmt: skip
        ok = alone or rate / replicas <= (2.5 if seed == 0 else 1.7)
        return Level(ok, 100.0 if ok else 9e9, 20.0, busy=0.5)

    monkeypatch.setattr(sizing, "level", fake)
    names = ["g5.xlarge", "g5.2xlarge", "r7i.2xlarge", "c7i.2xlarge"]
    plan = plan_generative(DecoderShape.from_zoo("llama-7b"), _int4_at_5(), catalog, providers=["aws"],
                           instances=names)  # fmt: skip
    got = {c.instance: (c.replicas, round(c.usd_per_hour, 3)) for c in plan.candidates}
    assert got == {"g5.xlarge": (3, 3.018), "g5.2xlarge": (3, 3.636), "c7i.2xlarge": (3, 1.071),
                   "r7i.2xlarge": (3, 1.588)}  # fmt: skip
    rec, cpu = plan.recommendation, plan.best("cpu")
    assert rec is not None and (rec.instance, rec.replicas) == ("c7i.2xlarge", 3)
    assert plan.best("gpu") is not None and plan.best("gpu").instance == "g5.xlarge"  # type: ignore[union-attr]
    assert cpu is rec and all(c.meets for c in plan.candidates)
    assert (
        "g5.xlarge: 2 replica(s) met the bounds on this draw of the simulation but not on 3 of 3 others; sized "
        "at 3, which meets them on all but at most one, that one within 10% (so is g5.2xlarge: the same replica)"
    ) in plan.notes
    assert sum("replica(s) met the bounds on this draw" in n for n in plan.notes) == 3  # A10G, c7i, r7i


@pytest.mark.slow  # ~1 s on 2 cores: kept out of make test-fast
def test_every_a10g_instance_type_gets_the_firmed_up_replica_count(catalog: Catalog) -> None:
    """llama-7b fp16 at 5 req/s with 2,000-3,000-token prompts over g5.xlarge and g5.2xlarge (one A10G replica):
    17 replicas meet on this draw and one other draw misses TTFT p95 by 23% (2457 ms against 2000): a queue near
    saturation, not noise, so 18. (g5.xlarge had been firmed up and g5.2xlarge, the same replica, not: a 2 x
    g5.2xlarge at int4 had so ranked above the firmed-up g5.xlarge; one miss of 2.1x had let a pick stand.)"""
    t = _int4_at_5(weight_precision="fp16", prompt_tokens={"uniform": [2000, 3000]})
    plan = plan_generative(DecoderShape.from_zoo("llama-7b"), t, catalog, instances=["g5.xlarge", "g5.2xlarge"])
    got = [(c.instance, c.replicas, c.meets) for c in plan.candidates]
    assert got == [("g5.xlarge", 18, True), ("g5.2xlarge", 18, True)]
    assert (
        "g5.xlarge: 17 replica(s) met the bounds on this draw of the simulation but not on 1 of 3 others, by more "
        "than 10% or past capacity (TTFT p95 2457 ms against 2000, TPOT p50 59.9 ms against 60); sized "
        "at 18, which meets them on all but at most one, that one within 10% (so is g5.2xlarge: the same replica)"
    ) in plan.notes
    assert not [n for n in plan.notes if n.startswith("thin margin")]  # 18 meets on every other draw


def _one_draw_misses(monkeypatch: pytest.MonkeyPatch, ttft_at_2: float) -> None:
    """Every draw meets at 2 replicas but seed 2's, which reads TTFT ``ttft_at_2`` (bound 2000); 3 meet on all."""

    def fake(costs: StepCosts, cfg: LLMSimConfig, rate: float, replicas: int, prompts: np.ndarray,
             outputs: np.ndarray, target: GenerativeTarget, seed: int, alone: bool = False) -> Level:  # fmt: skip
        if alone or replicas >= 3 or (replicas == 2 and seed != 2):
            return Level(True, 400.0, 50.0, busy=0.5)
        return Level(False, ttft_at_2 if replicas == 2 else 9e9, 50.0, busy=0.9)

    monkeypatch.setattr(sizing, "level", fake)


def test_a_pick_one_other_draw_misses_by_far_gets_more_replicas(catalog: Catalog, monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:  # fmt: skip
    """llama-7b-chat on seed 1 recommended 4 x g5.xlarge at TTFT p95 489 ms while one of the 3 other draws read
    4161 ms against 2000 (2.1x: a queue near saturation); the rule let all but one draw miss by any amount, so the
    pick stood with a thin-margin note. A miss past 10% of a bound now sizes as one by most draws; within 10% it
    stands, noted."""
    _one_draw_misses(monkeypatch, 4161.0)
    plan = plan_generative(DecoderShape.from_zoo("llama-7b"), _int4_at_5(), catalog, instances=["g5.xlarge"])
    rec = plan.recommendation
    assert rec is not None and rec.replicas == 3
    assert (
        "g5.xlarge: 2 replica(s) met the bounds on this draw of the simulation but not on 1 of 3 others, by "
        "more than 10% or past capacity (TTFT p95 4161 ms against 2000, TPOT p50 50.0 ms against "
        "60); sized at 3, which meets them on all but at most one, that one within 10%"
    ) in plan.notes
    assert not [n for n in plan.notes if n.startswith("thin margin")]

    _one_draw_misses(monkeypatch, 2150.0)  # 7.5% over: a thin margin, the pick stands
    plan = plan_generative(DecoderShape.from_zoo("llama-7b"), _int4_at_5(), catalog, instances=["g5.xlarge"])
    rec = plan.recommendation
    assert rec is not None and rec.replicas == 2
    [thin] = [n for n in plan.notes if n.startswith("thin margin")]
    assert "not on 1 of 3 others (TTFT p95 400-2150 ms against 2000" in thin
    assert not [n for n in plan.notes if "replica(s) met the bounds" in n]


def test_a_multi_gpu_rows_replica_is_that_of_its_own_tensor_parallel_degree(catalog: Catalog) -> None:
    """p4d.24xlarge (8 x A100) is planned at tp 1, 2, 4 and 8 and keeps its cheapest (tp 4 at 200 req/s); the
    plan had carried the replica of the last tp tried (tp 8: more KV room, all-reduces) for that row, so it was
    firmed up and swept with another replica."""
    plan = plan_generative(DecoderShape.from_zoo("llama-7b"), _int4_at_5(weight_precision="fp16", rate_per_s=200.0),
                           catalog, instances=["p4d.24xlarge"])  # fmt: skip
    [row] = plan.candidates
    _, cfg = plan.replicas[(row.provider, row.region, row.instance)]
    assert row.tp == 4 and cfg.kv_tokens == row.kv_tokens  # the KV room of a tp 4 replica, not of tp 8's
