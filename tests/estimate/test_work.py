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


@pytest.mark.slow  # > 1.6 s: make test runs it, make test-fast skips it
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


def test_normalisations_in_training_read_their_input_twice() -> None:
    """Batch norm in training needs the batch's statistics before it writes an output: a stats pass reads x, the
    normalise pass reads x again and writes y (3 activations, not the 2 of its inputs + outputs); its backward
    reads dy and x in a reduce pass and again in the element pass (5, not 3). In eval mode it is one pass."""
    from rightsize.estimate.work import _OpRecorder, second_pass_bytes

    def nb(t: object) -> float:
        return float(t.numel() * t.element_size()) if isinstance(t, torch.Tensor) else 0.0

    x = torch.randn(4, 8, 16, 16, requires_grad=True)
    act, w = nb(x), torch.ones(8)
    assert second_pass_bytes("native_batch_norm", (x, w, w, w, w, True, 0.1, 1e-5), nb) == act
    assert second_pass_bytes("native_batch_norm", (x, w, w, w, w, False, 0.1, 1e-5), nb) == 0.0
    bwd_args = (x, x, w, w, w, w, w, True, 1e-5, [True, True, True])
    assert second_pass_bytes("native_batch_norm_backward", bwd_args, nb) == 2 * act
    ln_args = (x, x, [16], w, w, w, w, [True, True, True])
    assert second_pass_bytes("native_layer_norm_backward", ln_args, nb) == 2 * act
    assert second_pass_bytes("native_layer_norm_backward", (*ln_args[:-1], [True, False, False]), nb) == 0.0
    assert second_pass_bytes("add", (x, x), nb) == 0.0

    bn = torch.nn.BatchNorm2d(8)
    rec = _OpRecorder()
    with rec.mode():
        bn.train()
        (bn(x) * torch.randn_like(x)).sum().backward()  # a dense dy (sum's is a broadcast scalar)
    ratios = sorted(b / act for c, _, b in rec.ops if c == "memory")
    assert any(3.0 <= r < 3.1 for r in ratios) and 5.0 <= ratios[-1] < 5.1  # forward, backward
    rec = _OpRecorder()
    with torch.no_grad(), rec.mode():
        bn.eval()
        bn(x)
    assert max(b / act for c, _, b in rec.ops if c == "memory") < 2.1


@pytest.mark.slow  # > 1.3 s: make test runs it, make test-fast skips it
def test_published_layout_of_mobilenet_pads_inside_its_convolutions() -> None:
    """Published MobileNetV2 results ran torchvision's layout (padding inside each convolution); the zoo's is
    Hugging Face's, with an explicit pad copy before each: the reference set traces "mobilenet_v2@torchvision"."""
    from rightsize.errors import NotFoundError
    from rightsize.models.zoo import layout_entry

    zoo = trace_work(get_entry("mobilenet_v2"), mode="inference", image_size=64, tiny=True)
    tv = trace_work(layout_entry("mobilenet_v2@torchvision"), mode="inference", image_size=64, tiny=True)
    assert tv.model == "mobilenet_v2@torchvision"
    assert tv.n_ops() < zoo.n_ops() and tv.n_ops("conv") == zoo.n_ops("conv")
    assert tv.flops(2) == pytest.approx(zoo.flops(2), rel=0.02)
    with pytest.raises(NotFoundError):
        layout_entry("mobilenet_v2@keras")
    with pytest.raises(NotFoundError):  # not a model users pick: the zoo's own lookup does not know it
        get_entry("mobilenet_v2@torchvision")
