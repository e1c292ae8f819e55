"""The report's memory breakdown adds up to the recommended candidate's memory figure (at the batch it runs)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from report_kit import GIB, MEMORY, training_plan

from rightsize.plan.result import Batching, PlanResult
from rightsize.report import build_report_data, render_markdown, write_report
from rightsize.report.data import at_planned_batch, memory_view
from rightsize.units import format_bytes

# bert-base, AdamW, fp16, seq 64 on CUDA (the planner's stored breakdown at batch 1: the optimizer step's peak,
# no activations) and its memory line fixed + per-sample x batch, as `rightsize plan examples/bert-finetune.yaml`
# stores them.
BERT_BATCH1 = {
    "weights": 437943304, "gradients": 437935112, "optimizer_states": 875870224,
    "optimizer_step_transient": 437935112, "activations": 0, "logits": 0, "backward_transient": 0, "kv_cache": 0,
    "cuda_context": 750000000, "workspace": 33554432, "fragmentation": 266788582,
}  # fmt: skip
FIXED, PER_SAMPLE = 2.9890544032303814 * GIB, 29.138602295092173 * 2**20
MICRO = 32


def _bert_plan(device_class: str = "gpu", batch: int | None = MICRO) -> PlanResult:
    plan = training_plan()
    assert plan.recommendation is not None
    rec = replace(
        plan.recommendation,
        device_class=device_class,  # type: ignore[arg-type]
        batching=Batching(batch, 0.0) if batch else None,
        memory_bytes=int(FIXED + PER_SAMPLE * MICRO),  # MemoryModel.bytes_at(micro), as plan/training.py
    )
    return replace(plan, recommendation=rec, candidates=[rec, *plan.candidates[1:]])


def _memory_rows(md: str) -> dict[str, str]:
    lines = md.split("\n")
    i = lines.index("## Memory per device")
    rows = [ln for ln in lines[i:] if ln.startswith("| ")][1:]  # without the header
    out = {}
    for ln in rows:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        out[cells[0]] = cells[1]
        if cells[0].startswith("total"):
            break
    return out


def test_training_memory_table_totals_the_candidates_memory_figure() -> None:
    plan = _bert_plan()
    assert plan.recommendation is not None and plan.recommendation.memory_bytes is not None
    figure = plan.recommendation.memory_bytes
    data = build_report_data(plan, memory={"breakdown": BERT_BATCH1, "tiers": [16, 24]})
    assert data.memory is not None
    assert abs(data.memory.total_bytes - figure) < 1.0  # the plan's figure, not the batch-1 estimate (3.0 GiB)
    assert data.memory.at_batch == "micro-batch 32" and data.memory.label == "estimate, micro-batch 32"
    act = data.memory.breakdown["activations at micro-batch 32"]
    assert 0.8 * GIB < act < PER_SAMPLE * MICRO + 1  # what batch 32 adds over the batch-1 peak

    rows = _memory_rows(render_markdown(data))
    assert "activations at micro-batch 32" in rows
    assert rows["total at micro-batch 32"] == format_bytes(figure) == "3.9 GiB"
    assert "At micro-batch 32, the batch the recommendation runs" in render_markdown(data)


def test_stored_plan_report_adds_up_too(tmp_path: Path) -> None:
    plan = _bert_plan()
    stored = plan.to_dict() | {"memory": {"breakdown": BERT_BATCH1, "tiers": [16, 24]}}  # as plan_record saves it
    md = write_report(stored, tmp_path / "r.md").read_text()
    assert _memory_rows(md)["total at micro-batch 32"] == "3.9 GiB"
    html = write_report(stored, tmp_path / "r.html").read_text()
    assert "Total 3.9 GiB." in html and "activations at micro-batch 32" in html


def test_batch_row_is_added_once_and_only_where_it_applies() -> None:
    plan = _bert_plan().to_dict()
    mv = memory_view({"breakdown": BERT_BATCH1})
    assert mv is not None
    once = at_planned_batch(mv, plan)
    assert at_planned_batch(once, plan) == once  # already at the figure: nothing more to add
    # a CPU recommendation: the breakdown is the GPU estimate (CUDA context), no row would make it the CPU's
    assert at_planned_batch(mv, _bert_plan("cpu").to_dict()) == mv
    assert at_planned_batch(mv, _bert_plan(batch=None).to_dict()) == mv  # batch unknown: left as given
    # inference keeps its own batch-1 activations row and names what the batch adds
    online = plan | {"kind": "online"}
    inf = at_planned_batch(memory_view(MEMORY) or mv, online)
    assert "activations" in inf.breakdown and "more activations at batch 32" in inf.breakdown


def test_a_quantizing_cpu_workers_load_peak_is_named_as_such(tmp_path: Path) -> None:
    """sentiment-api's int8 CPU worker peaks while it quantizes a copy of its float model (2 x the fp32 weights):
    the report had called that gap "more activations at batch 1", under a GPU-tiers title."""
    weights = 0.249 * GIB
    breakdown = {"weights": weights, "activations": 0.0015 * GIB, "fragmentation": 0.0005 * GIB}
    plan = _bert_plan("cpu", batch=1)
    assert plan.recommendation is not None
    rec = replace(plan.recommendation, precision="int8", memory_bytes=int(2 * weights), memory_at_load=True)
    stored = replace(plan, recommendation=rec, candidates=[rec]).to_dict()
    stored["memory"] = {"breakdown": breakdown, "label": "estimate on a CPU", "tiers": []}
    md = write_report(stored, tmp_path / "r.md").read_text()
    rows = _memory_rows(md)
    assert "float model copied while quantizing" in rows and "more activations at batch 1" not in rows
    assert rows["total at load peak"] == format_bytes(2 * weights)
    assert "loading, not serving, sets the peak" in md
    html = write_report(stored, tmp_path / "r.html").read_text()
    assert "Memory of one worker on a CPU" in html and "GPU memory tiers" not in html


def test_breakdown_components_read_as_words() -> None:
    mv = memory_view({"breakdown": BERT_BATCH1})
    assert mv is not None
    assert "CUDA context" in mv.breakdown and "optimizer states" in mv.breakdown and "cuda_context" not in mv.breakdown
