"""The zoo: name -> builder of a real architecture with random weights, plus synthetic inputs.

    x shapes (B = batch):  features [B, F] float | image [B, 3, H, W] float | tokens [B, S] int64
    logits:                [B, classes]          | [B, S, vocab] for decoder LMs

Weights are random: speed and memory do not depend on their values. Tiny variants keep the
architecture but shrink widths and depths so unit tests run in seconds.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from rightsize.errors import NotFoundError, SpecError, did_you_mean
from rightsize.inputfile import short

if TYPE_CHECKING:
    import torch
    from torch import nn

InputKind = Literal["features", "image", "tokens"]
Family = Literal["mlp", "cnn", "encoder", "decoder", "user"]


def _torch() -> Any:
    import torch

    return torch


def _module_base() -> type:
    from torch import nn

    return nn.Module


_ZOO_MODEL_CLS: type | None = None


def main_output(out: Any) -> Any:
    """The tensor a model's (tuple, list, dict or dataclass) output stands for: its ``logits`` entry, else its first
    tensor, looked for depth-first. A SpecError on ``model`` when it holds none."""
    import dataclasses

    import torch

    if isinstance(out, torch.Tensor):
        return out
    if dataclasses.is_dataclass(out) and not isinstance(out, type):  # @dataclass class Out: logits: Tensor
        out = {f.name: getattr(out, f.name) for f in dataclasses.fields(out)}
    if isinstance(out, dict):
        values = [out["logits"]] if isinstance(out.get("logits"), torch.Tensor) else list(out.values())
    elif isinstance(out, (tuple, list)):
        values = list(out)
    else:
        values = []
    for v in values:
        if isinstance(v, (torch.Tensor, tuple, list, dict)):
            try:
                return main_output(v)
            except SpecError:
                continue
    raise SpecError("model", f"its forward returned a {type(out).__name__} holding no tensor; return the output "
                    "tensor (or a tuple/dict whose first entry is one)")  # fmt: skip


def _zoo_model_cls() -> type:
    global _ZOO_MODEL_CLS
    if _ZOO_MODEL_CLS is None:
        import torch
        from torch import nn

        class _ZooModel(nn.Module):
            """Uniform wrapper: ``forward(x) -> logits``; ``loss(x, y)`` for training."""

            def __init__(self, inner: nn.Module, kind: InputKind, hf: bool, lm: bool) -> None:
                super().__init__()
                self.inner = inner
                self.kind = kind
                self.hf = hf
                self.lm = lm

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                if not self.hf:
                    out = self.inner(x)
                    # a user's model may return (logits, aux) or {"logits": ...}: measuring, memory and serving
                    # all read one tensor (memory and serve raised a traceback on a tuple, a float or None); an
                    # FX proxy (static int8 traces this forward) stands for whatever it returns
                    return out if isinstance(out, (torch.Tensor, torch.fx.Proxy)) else main_output(out)  # type: ignore[return-value]
                if self.kind == "tokens":
                    out = self.inner(input_ids=x)
                else:
                    out = self.inner(pixel_values=x)
                return out.logits

            def loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
                logits = self.forward(x)
                if self.lm:  # next-token prediction: predict x[:, 1:] from x[:, :-1]
                    return torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1).float(), y[:, 1:].flatten())
                return torch.nn.functional.cross_entropy(logits.float(), y)

        _ZOO_MODEL_CLS = _ZooModel
    return _ZOO_MODEL_CLS


# Re-exported name for type hints and isinstance checks (resolved lazily).
def __getattr__(name: str) -> Any:
    if name == "ZooModel":
        return _zoo_model_cls()
    raise AttributeError(name)


@dataclass(frozen=True)
class ZooEntry:
    """One zoo model. ``builder(tiny)`` returns the raw module; the entry wraps it as a ZooModel."""

    name: str
    family: Family
    kind: InputKind
    description: str
    builder: Callable[[bool], Any]
    hf: bool = True
    lm: bool = False
    classes: int = 2  # classification heads; LMs use the vocabulary
    vocab_size: int = 30522  # tokens models: ids are drawn below this (tiny models use 1000)
    features: int = 1000  # features models: input width
    meta_only: bool = False  # too big to build for real here (memory planning only)
    default_seq_len: int = 128
    default_image_size: int = 224
    max_positions: int | None = None  # rows of a learned position table: the longest sequence it runs (None: no cap)

    def build(self, tiny: bool = False) -> nn.Module:
        """The model with random weights in eval mode, wrapped to ``forward(x) -> logits``. The weights are seeded
        (``ZOO_SEED``; the caller's random state is left as it was), so every build is the same model: a pipeline's
        workers, or `serve --workers 2`'s, had each drawn its own and scored the same item differently."""
        import torch

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(ZOO_SEED)
            model = _zoo_model_cls()(self.builder(tiny), self.kind, self.hf, self.lm)
        return model.eval()

    def input_vocab(self, tiny: bool) -> int:
        return 1000 if tiny else self.vocab_size

    def sample_shape(
        self, seq_len: int | None = None, image_size: int | None = None, tiny: bool = False
    ) -> tuple[int, ...]:
        """Shape of one sample (no batch dimension)."""
        if self.kind == "features":
            return (100 if tiny else self.features,)
        if self.kind == "image":
            size = image_size or self.default_image_size
            return (3, min(size, 32) if tiny else size, min(size, 32) if tiny else size)
        seq = seq_len or self.default_seq_len
        return (min(seq, 16) if tiny else seq,)

    def check_seq_len(self, seq_len: int, tiny: bool = False, field: str = "input.seq_len") -> None:
        """A SpecError naming ``field`` when ``seq_len`` is past the position table: the model would fail on every
        config with a tensor-size mismatch, after minutes of measuring (tiny variants run 16 tokens at most)."""
        if self.kind == "tokens" and self.max_positions and not tiny and seq_len > self.max_positions:
            raise SpecError(
                field,
                f"{seq_len} is past {self.name}'s {self.max_positions} positions; use at most {self.max_positions}",
            )

    def example_input(
        self,
        batch_size: int,
        seq_len: int | None = None,
        image_size: int | None = None,
        tiny: bool = False,
        device: str = "cpu",
        seed: int = 0,
    ) -> torch.Tensor:
        """A synthetic batch: random features/pixels, or random token ids below the vocabulary."""
        torch = _torch()
        g = torch.Generator().manual_seed(seed)
        shape = (batch_size, *self.sample_shape(seq_len, image_size, tiny))
        if self.kind == "tokens":
            x = torch.randint(0, self.input_vocab(tiny), shape, generator=g)
        else:
            x = torch.randn(shape, generator=g)
        return x.to(device)

    def example_labels(self, x: torch.Tensor, tiny: bool = False, seed: int = 1) -> torch.Tensor:
        """Labels for ``loss``: the tokens themselves for LMs, random classes otherwise."""
        torch = _torch()
        if self.lm:
            return x
        g = torch.Generator().manual_seed(seed)
        classes = min(self.classes, 10) if tiny else self.classes  # tiny heads have at most 10 classes
        return torch.randint(0, classes, (x.shape[0],), generator=g).to(x.device)

    def count_params(self, tiny: bool = False) -> int:
        """Parameter count, from a build on the meta device (no memory, no time)."""
        torch = _torch()
        with torch.device("meta"):
            model = self.builder(tiny)
        return sum(p.numel() for p in model.parameters())


# --- builders ------------------------------------------------------------------------------------


def _simplenet(tiny: bool) -> nn.Module:
    """The seed article's MLP: 1000 -> 512 -> 256 -> 2 (tiny: 100 -> 32 -> 16 -> 2)."""
    from torch import nn

    f, h1, h2 = (100, 32, 16) if tiny else (1000, 512, 256)
    return nn.Sequential(nn.Linear(f, h1), nn.ReLU(), nn.Linear(h1, h2), nn.ReLU(), nn.Linear(h2, 2))


def _mobilenet_v2(tiny: bool, tf_padding: bool = True) -> nn.Module:
    from transformers import MobileNetV2Config, MobileNetV2ForImageClassification

    kw: dict[str, Any] = {"num_labels": 10 if tiny else 1000, "depth_multiplier": 0.35 if tiny else 1.0}
    cfg = MobileNetV2Config(image_size=32 if tiny else 224, tf_padding=tf_padding, **kw)
    return MobileNetV2ForImageClassification(cfg)


def _mobilenet_v2_torchvision(tiny: bool) -> nn.Module:
    """Hugging Face's MobileNetV2 pads explicitly before each convolution (TensorFlow's "SAME": 52 ``pad`` copies
    at batch 1); torchvision's and timm's, the layout published benchmarks ran, pad inside the convolution."""
    return _mobilenet_v2(tiny, tf_padding=False)


# Layouts of a zoo model that published results ran, traced as "name@layout" by the projection's reference set
# (estimate/reference.py): the work the publication's model did, not the zoo's.
LAYOUTS: dict[tuple[str, str], Callable[[bool], Any]] = {("mobilenet_v2", "torchvision"): _mobilenet_v2_torchvision}


def _resnet(depths: list[int]) -> Callable[[bool], nn.Module]:
    def build(tiny: bool) -> nn.Module:
        from transformers import ResNetConfig, ResNetForImageClassification

        kw: dict[str, Any] = {"layer_type": "bottleneck", "num_labels": 10 if tiny else 1000}
        if tiny:
            kw |= {"embedding_size": 16, "hidden_sizes": [32, 64, 128, 256], "depths": [1, 1, 1, 1]}
        else:
            kw |= {"embedding_size": 64, "hidden_sizes": [256, 512, 1024, 2048], "depths": depths}
        cfg = ResNetConfig(**kw)
        return ResNetForImageClassification(cfg)

    return build


ZOO_SEED = 0  # the zoo's random weights: one model per name, whichever process builds it

TINY_MAX_SEQ = 128  # position embeddings of the tiny text models: an explicit sequence length may go this far


def _tiny_text_kwargs() -> dict[str, Any]:
    return {"vocab_size": 1000, "max_position_embeddings": TINY_MAX_SEQ}


def _distilbert(tiny: bool) -> nn.Module:
    from transformers import DistilBertConfig, DistilBertForSequenceClassification

    kw: dict[str, Any] = {"num_labels": 2}
    if tiny:
        kw |= _tiny_text_kwargs() | {"dim": 32, "hidden_dim": 64, "n_layers": 2, "n_heads": 2}
    return DistilBertForSequenceClassification(DistilBertConfig(**kw))


def _bert_base(tiny: bool) -> nn.Module:
    from transformers import BertConfig, BertForSequenceClassification

    kw: dict[str, Any] = {"num_labels": 2}
    if tiny:
        kw |= _tiny_text_kwargs() | {
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
        }
    return BertForSequenceClassification(BertConfig(**kw))


def _gpt2(tiny: bool) -> nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    kw: dict[str, Any] = {}
    if tiny:
        kw = {
            "vocab_size": 1000,
            "n_positions": TINY_MAX_SEQ,
            "n_embd": 32,
            "n_layer": 2,
            "n_head": 2,
            "bos_token_id": 0,
            "eos_token_id": 0,
        }
    return GPT2LMHeadModel(GPT2Config(**kw))


# Llama shapes for memory planning (meta device only at full size).
# llama-1b: Llama 3.2 1B; llama-7b / llama-13b / llama-70b: Llama 2 (Touvron et al. 2023, Table 1 / model cards).
_LLAMA_SHAPES: dict[str, dict[str, int]] = {
    "llama-1b": {
        "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16,
        "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
    },
    "llama-7b": {
        "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 32000,
    },
    "llama-13b": {
        "hidden_size": 5120, "intermediate_size": 13824, "num_hidden_layers": 40,
        "num_attention_heads": 40, "num_key_value_heads": 40, "vocab_size": 32000,
    },
    # Llama 2 70B: GQA with 8 KV heads (Touvron et al. 2023, Table 1 and section 2.2)
    "llama-70b": {
        "hidden_size": 8192, "intermediate_size": 28672, "num_hidden_layers": 80,
        "num_attention_heads": 64, "num_key_value_heads": 8, "vocab_size": 32000,
    },
}  # fmt: skip


# Context each was trained for: Llama 2, 4k (Touvron et al. 2023, https://arxiv.org/abs/2307.09288, Table 1); Llama 3.2
# 1B, 128k (Meta's model card, 2024-09-25, https://github.com/meta-llama/llama-models/blob/main/models/llama3_2/MODEL_CARD.md).
# The tiny variant: 4096.
_LLAMA_CONTEXT = {"llama-1b": 131_072, "llama-7b": 4096, "llama-13b": 4096, "llama-70b": 4096}


def llama_config(name: str, tiny: bool = False) -> Any:
    from transformers import LlamaConfig

    shape: dict[str, Any] = dict(_LLAMA_SHAPES[name])
    if tiny:
        shape = {
            "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000,
        }  # fmt: skip
    context = 4096 if tiny else _LLAMA_CONTEXT[name]
    return LlamaConfig(**shape, max_position_embeddings=context, tie_word_embeddings=name == "llama-1b")


def _llama(name: str) -> Callable[[bool], nn.Module]:
    def build(tiny: bool) -> nn.Module:
        from transformers import LlamaForCausalLM

        return LlamaForCausalLM(llama_config(name, tiny))

    return build


ZOO: dict[str, ZooEntry] = {
    e.name: e
    for e in [
        ZooEntry("simplenet", "mlp", "features", "MLP 1000-512-256-2 (seed article)", _simplenet, hf=False),
        ZooEntry("mobilenet_v2", "cnn", "image", "MobileNetV2 1.0, 1000 classes", _mobilenet_v2, classes=1000),
        ZooEntry("resnet50", "cnn", "image", "ResNet-50, 1000 classes", _resnet([3, 4, 6, 3]), classes=1000),
        ZooEntry("resnet152", "cnn", "image", "ResNet-152, 1000 classes", _resnet([3, 8, 36, 3]), classes=1000),
        # max_positions: the configs' max_position_embeddings / n_positions (transformers' defaults)
        ZooEntry("distilbert", "encoder", "tokens", "DistilBERT base, 2-class head", _distilbert, max_positions=512),
        ZooEntry("bert-base", "encoder", "tokens", "BERT base uncased, 2-class head", _bert_base, max_positions=512),
        ZooEntry("gpt2", "decoder", "tokens", "GPT-2 small, LM head", _gpt2, lm=True, vocab_size=50257,
                 max_positions=1024),
        *[
            ZooEntry(n, "decoder", "tokens", f"Llama {n[6:].upper()} shape (memory planning)", _llama(n), lm=True,
                     vocab_size=s["vocab_size"], meta_only=n != "llama-1b", default_seq_len=2048)
            for n, s in _LLAMA_SHAPES.items()
        ],
    ]
}  # fmt: skip


def layout_entry(name: str) -> ZooEntry:
    """``get_entry``, and "name@layout" for a zoo model in a layout of ``LAYOUTS`` (the projection's reference set
    traces the model a publication ran; not a model users pick)."""
    base, _, layout = name.partition("@")
    if layout and (base, layout) in LAYOUTS and base in ZOO:
        return replace(ZOO[base], name=name, builder=LAYOUTS[(base, layout)])
    return get_entry(name)


def get_entry(name: str) -> ZooEntry:
    """The zoo entry for ``name``; a NotFoundError with a suggestion otherwise."""
    try:
        return ZOO[name]
    except KeyError:
        if os.path.isdir(name):  # "ort:/tmp" had read "model '/tmp' is not in the zoo"
            raise NotFoundError(
                f"model: {short(name)} is a folder without a config.json; give a zoo name, a model "
                "file (.onnx, .pt, .pt2) or a folder holding a Hugging Face config.json"
            ) from None
        raise NotFoundError(
            f"model {short(name)} is not in the zoo.{did_you_mean(name, ZOO)} "
            "Run `rightsize models` for the list. Your own model: 'package.module:factory', hf:CONFIG_DIR, "
            "hf:MODEL_TYPE (e.g. hf:bert), a .onnx file or a TorchScript .pt file."
        ) from None


def list_entries() -> list[ZooEntry]:
    return list(ZOO.values())
