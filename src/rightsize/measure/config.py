"""One sweep config: the plain value a child process receives, and the expansion of a spec."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from rightsize.cpus import usable_cores
from rightsize.errors import SpecError
from rightsize.measure.timing import TimingPolicy
from rightsize.models.byo import is_user_ref
from rightsize.models.revision import model_revision
from rightsize.profile import Measurement
from rightsize.spec import Workload

# Which precisions run on which device: bf16 is autocast on both; fp16 needs CUDA;
# int8 is dynamic quantization of Linear layers, a CPU-only kernel in PyTorch.
SUPPORTED: dict[str, dict[str, set[str]]] = {
    "inference": {"cpu": {"fp32", "bf16", "int8"}, "cuda": {"fp32", "bf16", "fp16"}},
    "training": {"cpu": {"fp32", "bf16"}, "cuda": {"fp32", "bf16", "fp16"}},
}

# The failure an int8 config records when dynamic quantization found no nn.Linear to swap (measure.precision): the
# model cannot run int8 here, so no plan projects it (workflows.precisions).
INT8_NOTHING_QUANTIZED = "int8 quantized nothing in this model"


@dataclass(frozen=True)
class BenchConfig:
    model: str
    mode: str
    device: str
    precision: str
    batch_size: int
    threads: int | None
    input: dict[str, int]
    optimizer: str
    tiny: bool
    timing: TimingPolicy
    user_shape: tuple[int, ...] | None = None
    epochs: int | None = None
    epoch_batches: int = 8
    memory_limit_bytes: int | None = None
    env_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    user_vocab: int | None = None  # a user model's token-id inputs are below this (None: float inputs)

    def result(self, status: str, **fields: Any) -> Measurement:
        """A Measurement for this config (``fields`` fill the numbers or the failure reason); one taken under
        ``--memory-limit`` carries the cap in ``extra.memory_limit_bytes`` (a failure there is the cap's, not the
        config's: ``store.precedence.newer_wins`` and the sweep's reuse rule read it)."""
        if self.memory_limit_bytes:
            fields["extra"] = {**fields.get("extra", {}), "memory_limit_bytes": self.memory_limit_bytes}
        return Measurement(
            model=self.model, mode=self.mode, device=self.device, precision=self.precision,
            batch_size=self.batch_size, threads=self.threads, input=dict(self.input), status=status,  # type: ignore[arg-type]
            optimizer=self.optimizer if self.mode == "training" else None, env_id=self.env_id, tiny=self.tiny, **fields,
        )  # fmt: skip

    @property
    def key(self) -> str:
        return self.result("ok").key + (f"|epochs={self.epochs}" if self.epochs else "")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BenchConfig:
        d = dict(d)
        d["timing"] = TimingPolicy(**d["timing"])
        if d.get("user_shape") is not None:
            d["user_shape"] = tuple(d["user_shape"])
        return cls(**d)


def input_of(workload: Workload, family_kind: str) -> dict[str, int]:
    """The input fields that matter for the model's kind (so keys don't vary with unused fields).

    A user's model adds what defines its input and itself: the spec's ``input.shape`` (``dim0``, ``dim1``, ...),
    the token vocabulary (``vocab``) and the checksum of the file its ref names (``rev``,
    ``models.revision``). Without them a changed shape or an edited model was planned from the old timings.
    """
    inp: dict[str, int] = {}
    if family_kind == "tokens":
        inp["seq_len"] = workload.input.seq_len
    elif family_kind == "image":
        inp["image_size"] = workload.input.image_size
    return inp | user_model_fields(workload)


def user_model_fields(workload: Workload) -> dict[str, int]:
    """What defines a user's model beyond its sizes: ``dim0``, ``dim1``, ... of ``input.shape``, ``vocab`` and the
    ``rev`` checksum of its file; empty for a zoo model. The key of its measurements (``input_of``) and of the trace
    and memory caches (``workflows.plan``)."""
    if not is_user_ref(workload.model):
        return {}
    out = {f"dim{i}": d for i, d in enumerate(workload.input.shape or ())}
    if (vocab := workload.input.token_vocab()) is not None:
        out["vocab"] = vocab
    if (rev := model_revision(workload.model)) is not None:
        out["rev"] = rev
    return out


def fit_threads(workload: Workload, cores: int | None = None) -> tuple[Workload, list[str]]:
    """``workload`` without the CPU thread counts above the ``cores`` this process may use, and a note naming them.

    More threads than cores time-slice against each other: the config reads as contended on any machine, quiet or
    not, and is measured again on every sweep. A SpecError on ``threads[0]`` when no thread count fits (the default,
    null = all cores, always does). Local sweeps only: a Ray sweep runs on other machines' cores.
    """
    if "cpu" not in workload.devices:
        return workload, []
    cores = cores or usable_cores()
    over = [t for t in workload.threads if t is not None and t > cores]
    if not over:
        return workload, []
    fit = [t for t in workload.threads if t is None or t <= cores]
    if not fit:
        raise SpecError("threads[0]", f"{over[0]} is more than the {cores} cores this machine has; use at most "
                        f"{cores}, or null for all cores")  # fmt: skip
    skipped = ", ".join(str(t) for t in over)
    return workload.model_copy(update={"threads": fit}), [f"threads {skipped} skipped: this machine has {cores} cores"]


def expand(workload: Workload, kind: str, *, env_id: str, has_cuda: bool, epochs: int | None = None,
           memory_limit_bytes: int | None = None) -> tuple[list[BenchConfig], list[str]]:  # fmt: skip
    """All configs of a spec, and notes on the combinations skipped (unsupported or no CUDA)."""
    t = workload.timing
    timing = TimingPolicy(t.warmup, t.min_repeats, t.max_repeats, t.target_ci, t.max_time_s)
    inp = input_of(workload, kind)
    shape = tuple(workload.input.shape) if workload.input.shape else None
    configs, notes = [], []
    for device in workload.devices:
        if device == "cuda" and not has_cuda:
            notes.append("device cuda skipped: no CUDA device on this machine")
            continue
        for precision in workload.precisions:
            if precision not in SUPPORTED[workload.mode][device]:
                notes.append(f"{precision} {workload.mode} on {device} skipped: not supported (see docs/measuring.md)")
                continue
            for threads in workload.threads if device == "cpu" else [None]:
                for b in workload.batch_sizes:
                    configs.append(
                        BenchConfig(
                            workload.model,
                            workload.mode,
                            device,
                            precision,
                            b,
                            threads,
                            inp,
                            workload.optimizer,
                            workload.tiny,
                            timing,
                            shape,
                            epochs,
                            memory_limit_bytes=memory_limit_bytes,
                            env_id=env_id,
                            user_vocab=workload.input.token_vocab(),
                        )
                    )
    return configs, notes
