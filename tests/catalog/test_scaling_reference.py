"""The published data-parallel scaling rows (catalog/data/reference/scaling.csv) parse, are sourced and dated, and the
all-reduce benchmark (benchmarks/comm_scaling.py) computes a modelled efficiency for every one of them."""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Callable
from importlib import resources
from types import ModuleType

import pytest


def _raw() -> list[dict[str, str]]:
    text = (resources.files("rightsize.catalog") / "data" / "reference" / "scaling.csv").read_text(encoding="utf-8")
    return list(csv.DictReader(io.StringIO(text)))


def test_every_row_parses_with_an_https_source_a_date_and_a_quoted_note(
    load_benchmark: Callable[[str], ModuleType],
) -> None:
    bench, raw = load_benchmark("comm_scaling"), _raw()
    assert len(raw) >= 8
    ids = [r["id"] for r in raw]
    assert len(ids) == len(set(ids))
    for r in raw:
        row = bench.parse_row(r)
        assert r["source_url"].startswith("https://"), row.id
        assert re.fullmatch(r"(19|20)\d\d-\d\d-\d\d", r["published"]), row.id
        assert r["source_title"].strip() and len(r["notes"]) > 40, row.id
        assert row.params > 1e6 and row.per_gpu_batch >= 1 and row.grad_accum >= 1, row.id
        assert row.gpus_per_node >= 1 and row.nodes >= 1 and row.workers >= 2, row.id
        assert 0 < row.published_efficiency < 1.2, row.id
        if row.nodes > 1:
            assert row.network_gbps > 0 and r["network"].strip(), row.id


def test_rows_cover_resnet50_and_bert_on_one_node_of_8_and_on_2_to_4_nodes(
    load_benchmark: Callable[[str], ModuleType],
) -> None:
    rows = load_benchmark("comm_scaling").load_rows()
    for model in ("resnet50", "bert-base"):
        mine = [r for r in rows if r.model == model]
        assert any(r.nodes == 1 and r.gpus_per_node == 8 for r in mine), model
        assert any(2 <= r.nodes <= 4 for r in mine), model


def test_the_benchmark_row_function_computes_for_every_row(load_benchmark: Callable[[str], ModuleType]) -> None:
    bench = load_benchmark("comm_scaling")
    for row in bench.load_rows():
        c = bench.compare_row(row)
        assert c.micro_ms > 0 and c.compute_ms >= c.micro_ms, row.id
        assert c.intra_ms >= 0 and c.inter_ms >= 0 and c.exposed_ms >= 0, row.id
        assert (c.inter_ms > 0) == (row.nodes > 1), row.id
        assert 0 < c.modelled <= 1.0 + 1e-9 or row.baseline == "1node", row.id
        assert math.isfinite(c.gap_points) and c.published == pytest.approx(row.published_efficiency), row.id
        assert isinstance(bench.why(c), str)


def test_a_row_without_its_own_single_gpu_rate_uses_a_published_single_gpu_row(
    load_benchmark: Callable[[str], ModuleType],
) -> None:
    bench = load_benchmark("comm_scaling")
    ref = "lambda-v100-16gb-resnet50-fp32"
    text = (resources.files("rightsize.catalog") / "data" / "reference" / "published.csv").read_text(encoding="utf-8")
    rate = next(float(r["value"]) for r in csv.DictReader(io.StringIO(text)) if r["id"] == ref)
    raw = dict(_raw()[0], id="fallback", gpu1_per_s="", gpu1_ref=ref)
    c = bench.compare_row(bench.parse_row(raw))
    assert f"published.csv {ref}" in c.step_from
    assert c.micro_ms == pytest.approx(int(raw["per_gpu_batch"]) / rate * 1e3)


def test_a_broken_row_is_named(load_benchmark: Callable[[str], ModuleType]) -> None:
    bench = load_benchmark("comm_scaling")
    raw = dict(_raw()[0], id="broken", gpu1_per_s="", gpu1_ref="")
    with pytest.raises(ValueError, match="broken"):
        bench.parse_row(raw)
    with pytest.raises(ValueError, match="baseline"):
        bench.parse_row(dict(_raw()[0], baseline="2gpu"))


def test_each_row_is_judged_by_a_jitter_fitted_without_its_source(load_benchmark: Callable[[str], ModuleType]) -> None:
    bench = load_benchmark("comm_scaling")
    rows = bench.load_rows()
    held = bench.held_out(rows)
    assert [c.row.id for c in held] == [r.id for r in rows]
    for src in sorted({r.source for r in rows}):
        cv = bench.fit_cv(r for r in rows if r.source != src)
        assert {c.cv for c in held if c.row.source == src} == {cv}, src
    # the fit is a real least-squares minimum: both neighbours on the grid do worse
    best = bench.fit_cv(rows)

    def sq(cv: float) -> float:
        return sum(bench.compare_row(r, cv).gap_points ** 2 for r in rows)

    assert sq(best) < sq(best - 0.005) and sq(best) < sq(best + 0.005)
    # without the wait for the slowest GPU every single-node row is modelled at 100%
    assert {round(bench.compare_row(r, 0.0).modelled, 6) for r in rows if r.nodes == 1} == {1.0}
