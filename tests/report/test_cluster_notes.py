"""The captions of the cluster-size charts say what their points show."""

from __future__ import annotations

from typing import Any

from rightsize.report.charts_jobs import cluster_charts, size_notes
from rightsize.report.data import build_report_data


def _c(instance: str, count: int, minutes: float, usd: float) -> dict[str, Any]:
    return {"instance": instance, "count": count, "precision": "fp32", "purchase": "on-demand", "feasible": True,
            "runtime_hours": minutes / 60, "cost_usd_total": usd}  # fmt: skip


def test_the_caption_says_more_nodes_are_slower_when_they_are() -> None:
    """BERT-base on 1 x g4dn.xlarge took 16.3 min and on 2 32.1 min (the all-reduce of 440 MB of gradients over
    10-25 Gb/s outweighs a 40-64 ms step), under a caption "More nodes finish sooner but scaling is not perfect"."""
    cands = [_c("g4dn.xlarge", 1, 16.3, 0.14), _c("g4dn.xlarge", 2, 32.1, 0.56), _c("g5.xlarge", 1, 10.0, 0.17),
             _c("g5.xlarge", 2, 6.0, 0.2), _c("g5.xlarge", 4, 8.0, 0.53)]  # fmt: skip
    data = build_report_data({"kind": "training", "candidates": cands, "target": {"training": {"steps": 10}}})
    charts = "".join(cluster_charts(data))
    assert "More nodes finish sooner" not in charts
    time_note, cost_note = size_notes({"g4dn.xlarge fp32": cands[:2], "g5.xlarge fp32": cands[2:]}, "nodes")
    assert time_note == (
        "g4dn.xlarge fp32: 1 node 16.3 min, 2 nodes 32.1 min: more nodes are slower. "
        "Fastest size per configuration shown: 1 node for 1, 2 nodes for 1."
    )
    assert time_note in charts and cost_note in charts
    assert cost_note == "Every configuration shown costs least on its fewest nodes: more nodes only add cost."
    g5 = {"g5.xlarge fp32": cands[2:]}
    assert size_notes(g5, "nodes")[0] == (
        "g5.xlarge fp32: 1 node 10 min, 2 nodes 6 min, 4 nodes 8 min: fastest on 2 nodes, slower on more."
    )
    fast = [_c("c7i.large", 1, 60.0, 1.0), _c("c7i.large", 4, 16.0, 0.9)]
    assert size_notes({"c7i.large fp32": fast}, "instances") == (
        "c7i.large fp32: 1 instance 1 h, 4 instances 16 min: 3.8x as fast on 4x the instances.",
        "Cheapest size per configuration shown: 4 instances for 1.",
    )
    assert size_notes({"one": cands[:1]}, "nodes") == ("", "")  # one size: nothing to compare
