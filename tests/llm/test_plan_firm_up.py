"""Which replica each generative plan row carries, and firming it up on other draws of its simulation."""

from __future__ import annotations

import pytest

from rightsize.catalog import load_catalog
from rightsize.catalog.model import Catalog
from rightsize.llm.plan import plan_generative
from rightsize.llm.shape import DecoderShape
from rightsize.spec.targets import GenerativeTarget


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


def _int4_at_5(**kw: object) -> GenerativeTarget:
    return GenerativeTarget.model_validate({"rate_per_s": 5.0, "prompt_tokens": {"uniform": [200, 800]},
                                            "output_tokens": {"uniform": [64, 256]}, "weight_precision": "int4",
                                            "ttft": {"percentile": 95, "bound_ms": 2000},
                                            "tpot": {"percentile": 50, "bound_ms": 60}} | kw)  # fmt: skip


def test_a_multi_gpu_rows_replica_is_that_of_its_own_tensor_parallel_degree(catalog: Catalog) -> None:
    """p4d.24xlarge (8 x A100) is planned at tp 1, 2, 4 and 8 and keeps its cheapest (tp 2 at 150 req/s); the
    plan had carried the replica of the last tp tried (tp 8: more KV room, all-reduces) for that row, so it was
    firmed up and swept with another replica."""
    plan = plan_generative(DecoderShape.from_zoo("llama-7b"), _int4_at_5(weight_precision="fp16", rate_per_s=150.0),
                           catalog, instances=["p4d.24xlarge"])  # fmt: skip
    [row] = plan.candidates
    _, cfg = plan.replicas[(row.provider, row.region, row.instance)]
    assert row.tp == 2 and cfg.kv_tokens == row.kv_tokens  # the KV room of a tp 2 replica, not of tp 8's
