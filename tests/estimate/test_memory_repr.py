"""A MemoryEstimate shows itself in one line (the dataclass's repr ran to 2 KB) and as a notebook table."""

from __future__ import annotations

from rightsize.estimate.memory import GIB, MemoryEstimate

BREAKDOWN = {
    "weights": 13476831488,
    "gradients": 0,
    "optimizer_states": 0,
    "activations": 207650816,
    "kv_cache": 1073741824,
    "cuda_context": 750000000,
    "workspace": 33554432,
    "fragmentation": 657473536,
}


def _estimate(**kw: object) -> MemoryEstimate:
    total = sum(BREAKDOWN.values())
    base: dict[str, object] = dict(
        model="llama-7b", mode="infer", precision="fp16", device="cuda", batch_size=1, seq_len=2048, image_size=None,
        optimizer=None, fused=False, param_count=6738415616, breakdown=BREAKDOWN, components=dict(BREAKDOWN),
        peak_phase="forward", total_bytes=total, total_gib=round(total / GIB, 3), tier="A10/A10G/L4 (22.49 GiB)",
        tier_memory_gib=22.49, fits=True,
        tiers=[{"tier": f"t{i}", "memory_gib": 8.0 * i, "fits": i > 1} for i in range(1, 12)],
        assumptions=["a long assumption, one of many " * 4] * 8,
    )  # fmt: skip
    return MemoryEstimate(**(base | kw))  # type: ignore[arg-type]


def test_the_repr_is_one_line_with_the_peak_and_its_largest_parts() -> None:
    shown = repr(_estimate())
    assert shown == ("MemoryEstimate('llama-7b', infer fp16 on cuda, batch 1, seq 2048: 15.09 GiB peak (weights "
                     "12.6 GiB, kv_cache 1.0 GiB, cuda_context 715.3 MiB), fits A10/A10G/L4 (22.49 GiB))")  # fmt: skip
    over = repr(_estimate(tier=None, tier_memory_gib=None, fits=False, tiers=[{"tier": "8", "fits": False}] * 2))
    assert over.endswith("cuda_context 715.3 MiB), fits none of the 2 tiers checked)")
    image = repr(_estimate(model="resnet50", seq_len=None, image_size=224, batch_size=32))
    assert image.startswith("MemoryEstimate('resnet50', infer fp16 on cuda, batch 32, image 224: 15.09 GiB peak")


def test_the_notebook_table_lists_every_live_part_largest_first() -> None:
    shown = _estimate()._repr_html_()
    assert shown.startswith("<div><b>llama-7b: infer fp16 on cuda, batch 1, seq 2048: 15.09 GiB peak")
    assert "<th>part</th><th>GiB</th><th>share</th>" in shown and "gradients" not in shown  # zero parts left out
    assert shown.index("<td>weights</td><td>12.6</td><td>83%</td>") < shown.index("<td>kv_cache</td><td>1</td>")
    assert shown.count("<tr>") == 1 + 6 and "more:" not in shown
