"""The batch pipeline on Ray Data over the two-node cluster: every item exactly once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rightsize.errors import SpecError
from rightsize.spec import parse_spec
from rightsize.store import Store
from rightsize.workflows.pipeline import run_and_project

from .conftest import LocalCluster

pytestmark = [pytest.mark.ray, pytest.mark.filterwarnings("ignore::DeprecationWarning")]


def test_ray_pipeline_processes_every_item_exactly_once(ray_cluster: LocalCluster, tmp_path: Path) -> None:
    w = parse_spec({"model": "distilbert", "tiny": True, "input": {"seq_len": 16}, "batch_sizes": [16]})
    out = tmp_path / "out.jsonl"
    res = run_and_project(
        w, items=1500, ray_address=ray_cluster.address, workers=2, output_path=out, store=Store(tmp_path / "s.sqlite")
    )
    assert res.engine == "ray" and res.workers == 2 and res.cluster and res.cluster["nodes"] >= 2
    assert res.items == 1500 and res.exactly_once
    assert (res.ids.unique, res.ids.missing, res.ids.duplicated, res.ids.unexpected) == (1500, 0, 0, 0)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["id"] for r in rows) == list(range(1500))  # written once each, nothing else
    assert all(0 <= r["label"] < 2 and 0.5 <= r["score"] <= 1.0 for r in rows)  # 2-class head: argmax prob >= 0.5
    for stage in ("read", "preprocess", "infer", "write"):
        assert res.stages[stage]["wall_s"] > 0, stage
    assert res.throughput_items_per_s == pytest.approx(1500 / res.wall_s)
    assert res.plan is not None and res.plan.recommendation is not None
    assert (res.plan.recommendation.cost_usd_total or 0) > 0


def test_an_actor_whose_model_cannot_be_built_ends_the_run_with_its_error(
    ray_cluster: LocalCluster, tmp_path: Path
) -> None:
    """A factory that raised in the actors' constructor reached the driver as Ray's ActorDiedError: a traceback, exit 1.
    ``struct:pack`` is a factory importable on every node that raises when called without its argument (a builtin
    with no signature to read: ``json:loads``, whose signature names its argument, is refused before Ray starts)."""
    w = parse_spec({"model": "struct:pack", "input": {"shape": [4]}, "batch_sizes": [4]})
    with pytest.raises(SpecError) as err:
        run_and_project(w, items=64, ray_address=ray_cluster.address, workers=1, store=Store(tmp_path / "s.sqlite"))
    assert str(err.value).startswith("model: struct:pack() raised TypeError: ")
    assert str(err.value).endswith("; fix that factory")
    assert type(err.value) is SpecError  # the error itself, not Ray's wrapper of it
