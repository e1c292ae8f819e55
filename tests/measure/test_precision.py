"""int8 on a CPU: a convolution net is quantized statically (its convolutions run int8), a transformer
dynamically; what each got is recorded, and a model FX cannot trace falls back instead of failing."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from rightsize.measure.precision import int8_scheme, prepare_inference  # noqa: E402
from rightsize.models.zoo import get_entry  # noqa: E402


def _quantized_convs(model: torch.nn.Module) -> int:
    return sum("Conv" in type(m).__name__ and ".quantized" in type(m).__module__ for m in model.modules())


@pytest.mark.slow  # several seconds: make test runs it, make test-fast skips it
def test_a_convolution_net_is_quantized_statically_and_still_answers() -> None:
    entry = get_entry("resnet50")
    torch.manual_seed(0)
    model = entry.build(tiny=True).eval()
    x = entry.example_input(2, tiny=True)
    with torch.inference_mode():
        ref = model(x)
    q = prepare_inference(model, "int8", entry.example_input(1, tiny=True, seed=3))
    assert int8_scheme(q) == "static"
    assert _quantized_convs(q) >= 8  # every bottleneck's convolutions, not only the classifier
    with torch.inference_mode():
        out = q(x)
    assert out.shape == ref.shape
    cosine = float(torch.nn.functional.cosine_similarity(out.flatten(), ref.flatten(), dim=0))
    assert cosine > 0.9  # int8 weights and activations of a random tiny net: near fp32's answer, not equal


def test_without_a_sample_batch_or_convolutions_int8_is_dynamic() -> None:
    cnn, text = get_entry("resnet50"), get_entry("distilbert")
    assert int8_scheme(prepare_inference(cnn.build(tiny=True).eval(), "int8")) == "dynamic"
    q = prepare_inference(text.build(tiny=True).eval(), "int8", text.example_input(1, tiny=True))
    assert int8_scheme(q) == "dynamic" and _quantized_convs(q) == 0
    assert int8_scheme(prepare_inference(text.build(tiny=True), "fp32")) is None


def test_a_model_fx_cannot_trace_falls_back_to_dynamic() -> None:
    # MobileNetV2 (Hugging Face) pads TF-style from int(tensor.shape): every conv layer is untraceable
    entry = get_entry("mobilenet_v2")
    q = prepare_inference(entry.build(tiny=True).eval(), "int8", entry.example_input(1, tiny=True))
    assert int8_scheme(q) == "dynamic"
    with torch.inference_mode():
        assert q(entry.example_input(2, tiny=True)).shape[0] == 2


def test_a_quantized_graph_that_cannot_run_falls_back_to_dynamic(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch.ao.quantization.quantize_fx as qfx

    class Broken(torch.nn.Module):  # converted, with a quantized convolution, but it cannot run
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.ao.nn.quantized.Conv2d(3, 3, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            raise RuntimeError("quantized::conv2d: unsupported input")

    monkeypatch.setattr(qfx, "convert_fx", lambda prepared: Broken())
    entry = get_entry("resnet50")
    q = prepare_inference(entry.build(tiny=True).eval(), "int8", entry.example_input(1, tiny=True))
    assert int8_scheme(q) == "dynamic"  # not a model that fails in the timed runs
    with torch.inference_mode():
        assert q(entry.example_input(2, tiny=True)).shape[0] == 2


def test_int8_that_quantizes_nothing_is_refused_not_timed_as_fp32() -> None:
    """A TorchScript model's layers are script modules: dynamic quantization swapped none, and its fp32 speed was
    stored and planned as int8."""
    from torch import nn

    from rightsize.errors import UnsupportedError

    scripted = torch.jit.script(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)))
    with pytest.raises(UnsupportedError, match=r"^precision: int8 quantized nothing in this model .*use fp32 or bf16"):
        prepare_inference(scripted, "int8")
    assert int8_scheme(prepare_inference(nn.Sequential(nn.Linear(8, 2)), "int8")) == "dynamic"
