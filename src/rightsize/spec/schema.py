"""The workload spec's schema. The pydantic models are at once the Python API and the YAML schema.

Importing this module never imports torch: specs are validated before anything heavy loads.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, field_validator, model_validator

from rightsize.inputfile import unprintable
from rightsize.spec.targets import SpecModel, Targets

Mode = Literal["inference", "training"]
Device = Literal["cpu", "cuda"]
Precision = Literal["fp32", "bf16", "fp16", "int8"]
Optimizer = Literal["adamw", "sgd"]
Engine = Literal["torch", "onnxruntime", "openvino"]

DEVICES: tuple[str, ...] = ("cpu", "cuda")
PRECISIONS: tuple[str, ...] = ("fp32", "bf16", "fp16", "int8")


class InputSpec(SpecModel):
    """Input shape. Text models read ``seq_len``, vision models ``image_size``; the rest is ignored."""

    seq_len: int = Field(128, ge=1, le=1_000_000, description="tokens per sample (text models)")
    image_size: int = Field(224, ge=8, le=8192, description="pixels per side (vision models)")
    shape: list[int] | None = Field(
        None, description="per-sample input shape, for user models (factory, TorchScript, ONNX with symbolic dims)"
    )
    dtype: Literal["float32", "int64"] = Field(
        "float32", description="user models: float32 inputs, or int64 token ids (drawn below vocab_size)"
    )
    vocab_size: int | None = Field(None, ge=2, le=10_000_000, description="user models: token ids are below this")

    def token_vocab(self) -> int | None:
        """The vocabulary a user model's token-id inputs are drawn below; None for float inputs."""
        if self.dtype != "int64":
            return self.vocab_size  # an ONNX graph knows its dtype: vocab_size alone still applies there
        return self.vocab_size or 1000

    @field_validator("shape")
    @classmethod
    def _shape(cls, v: list[int] | None) -> list[int] | None:
        if v is not None:
            if not v:
                raise ValueError("must list at least one dimension, e.g. [3, 224, 224]")
            if len(v) > 8:
                raise ValueError(f"must have at most 8 dimensions, got {len(v)}")
            for i, d in enumerate(v):
                if not 1 <= d <= 1_000_000:
                    raise ValueError(f"[{i}] must be between 1 and 1000000, got {d}")
            if math.prod(v) > 2**31:
                raise ValueError(f"describes {math.prod(v):,} values per sample; at most 2^31")
        return v


class TimingSpec(SpecModel):
    """Adaptive repetition: stop when the median's 95% CI is within ±target_ci, or at max_time_s."""

    warmup: int = Field(3, ge=0, le=1000, description="untimed calls before timing")
    min_repeats: int = Field(5, ge=3, le=100_000)
    max_repeats: int = Field(200, ge=3, le=1_000_000)
    target_ci: float = Field(0.05, gt=0, le=1, description="relative half-width of the median's 95% CI")
    max_time_s: float = Field(10.0, gt=0, le=3600, description="time cap per config")

    @model_validator(mode="after")
    def _repeats_ordered(self) -> TimingSpec:
        if self.max_repeats < self.min_repeats:
            raise ValueError(f"max_repeats ({self.max_repeats}) must be >= min_repeats ({self.min_repeats})")
        return self


class Workload(SpecModel):
    """One workload: the model and how to sweep it, plus optional planning targets."""

    name: str = Field("workload", min_length=1, max_length=200)
    model: str = Field(
        ...,
        min_length=1,
        max_length=500,
        description="zoo name, package.module:factory, hf:DIR|TYPE, model.onnx or model.pt",
    )
    mode: Mode = "inference"
    input: InputSpec = InputSpec()
    batch_sizes: list[int] = Field(default_factory=lambda: [1, 8, 32], min_length=1, max_length=64)
    precisions: list[Precision] = Field(default_factory=lambda: list[Precision](["fp32"]), min_length=1)
    devices: list[Device] = Field(default_factory=lambda: list[Device](["cpu"]), min_length=1)
    threads: list[int | None] = Field(
        default_factory=lambda: list[int | None]([None]),
        min_length=1,
        max_length=64,
        description="CPU intra-op threads; null = all cores",
    )
    engines: list[Engine] = Field(
        default_factory=lambda: list[Engine](["torch"]),
        min_length=1,
        description="inference engines to measure and plan: torch (eager), onnxruntime, openvino (CPU)",
    )
    optimizer: Optimizer = "adamw"
    tiny: bool = Field(False, description="use the model's tiny variant (tests, smoke runs)")
    timing: TimingSpec = TimingSpec()
    node_types: dict[str, str] | None = Field(
        None, description="Ray: instance type -> custom resource, e.g. {g5.xlarge: 'instance:g5.xlarge'}"
    )
    targets: Targets | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if (why := unprintable(v)) is not None:  # an ESC in a name recoloured every table and `results` row
            raise ValueError(f"{why}; write plain text")
        return v

    @field_validator("batch_sizes")
    @classmethod
    def _batches(cls, v: list[int]) -> list[int]:
        for i, b in enumerate(v):
            if b < 1:
                raise ValueError(f"[{i}] must be >= 1, got {b}")
            if b > 1_000_000:
                raise ValueError(f"[{i}] must be <= 1000000, got {b}")
        return sorted(set(v))

    @field_validator("engines")
    @classmethod
    def _engines(cls, v: list[str]) -> list[str]:
        return list(dict.fromkeys(v))  # order kept, repeats dropped

    @model_validator(mode="after")
    def _engines_for_inference(self) -> Workload:
        if self.engines != ["torch"] and self.mode != "inference":
            raise ValueError("engines: onnxruntime and openvino run inference only; use engines: [torch] for training")
        return self

    @field_validator("threads")
    @classmethod
    def _threads(cls, v: list[int | None]) -> list[int | None]:
        for i, t in enumerate(v):
            if t is not None and not 1 <= t <= 4096:
                raise ValueError(f"[{i}] must be between 1 and 4096, or null (all cores), got {t}")
        return v

    @field_validator("precisions", "devices")
    @classmethod
    def _dedupe(cls, v: list[str]) -> list[str]:
        return list(dict.fromkeys(v))

    @field_validator("model")
    @classmethod
    def _model_ref(cls, v: str) -> str:
        for prefix in ("ort:", "ov:"):  # the same model on ONNX Runtime / OpenVINO
            if v.startswith(prefix):
                return prefix + cls._model_ref(v[len(prefix) :])
        if v.startswith("hf:"):
            if len(v) == 3:
                raise ValueError("hf: needs a config directory or a model type, e.g. hf:./my-model or hf:bert")
            return v
        if v.endswith((".onnx", ".pt", ".pt2", ".pth", ".ts", ".torchscript", ".jit")):
            return v  # a model file: resolved (and checked) when it is loaded
        if ":" in v:
            module, _, attr = v.partition(":")
            if (
                not module
                or not attr
                or not all(p.isidentifier() for p in module.split("."))
                or not attr.isidentifier()
            ):
                raise ValueError(
                    f"must be a zoo name, 'package.module:factory', hf:DIR|TYPE or a .onnx/.pt file, got {v!r}"
                )
        return v
