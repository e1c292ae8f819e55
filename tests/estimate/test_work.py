"""Traced work: FLOPs agree with a real run's FlopCounterMode, linear in the batch, classes present."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from rightsize.estimate.work import classify_op, trace_work  # noqa: E402
from rightsize.models.zoo import get_entry  # noqa: E402
from rightsize.profile import WorkProfile  # noqa: E402


def _real_flops(name: str, batch: int, **inp: int) -> float:
    entry = get_entry(name)
    model = entry.build(True).eval()
    x = entry.example_input(batch, tiny=True, **inp)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(x)
    return float(counter.get_total_flops())


@pytest.mark.parametrize(("name", "inp"), [("distilbert", {"seq_len": 32}), ("resnet50", {"image_size": 64})])
def test_traced_flops_match_a_real_forward(name: str, inp: dict[str, int]) -> None:
    work = trace_work(get_entry(name), mode="inference", tiny=True, **inp)  # type: ignore[arg-type]
    for b in (1, 3):
        # FlopCounterMode on a CPU run does not count the fused attention kernel; the trace does
        attention = sum(n * f for c, n, f, _ in work.at(b) if c == "attention")
        assert work.flops(b) - attention == pytest.approx(_real_flops(name, b, **inp), rel=0.05)
    assert work.n_kernels > 10 and work.n_ops() > work.n_kernels  # views are dispatched but launch nothing


def test_training_trace_has_backward_and_costs_about_three_forwards() -> None:
    entry = get_entry("resnet50")  # full size, fake tensors: costs no memory
    inf = trace_work(entry, mode="inference", image_size=64)
    train = trace_work(entry, mode="training", image_size=64)
    assert 2.5 < train.flops(4) / inf.flops(4) < 3.5
    assert train.n_ops("conv") >= 2 * inf.n_ops("conv")


def test_work_profile_round_trips() -> None:
    w = trace_work(get_entry("distilbert"), mode="inference", seq_len=16, tiny=True)
    assert WorkProfile.from_dict(w.to_dict()) == w
    assert {c for c, *_ in w.ops} >= {"gemm", "attention", "memory", "host"}


def test_classify_op() -> None:
    assert classify_op("addmm", False) == "gemm"
    assert classify_op("convolution", False) == "conv"
    assert classify_op("_scaled_dot_product_flash_attention", False) == "attention"
    assert classify_op("add", False) == "memory"
    assert classify_op("view", True) == "host"
