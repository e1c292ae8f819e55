"""The plain values passed along the data flow (no torch here; planning and reports import this).

Measurement   one config of a sweep on one machine (measure -> store)
Profile       a model's measurements on one machine + its environment (store -> estimate)
ServiceCurve  t(batch) ± band on one device and precision, measured or projected (estimate -> plan)
"""

from __future__ import annotations

import bisect
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Provenance = Literal["measured", "projected"]
Status = Literal["ok", "failed"]


@dataclass(frozen=True)
class LatencyStats:
    """Per-call latency of one batch, milliseconds."""

    p50: float
    p95: float
    p99: float
    mean: float
    std: float
    n: int  # timed repetitions

    @property
    def cv(self) -> float:
        """Coefficient of variation (std / mean); the service-time spread the planner simulates."""
        return self.std / self.mean if self.mean > 0 else 0.0


@dataclass(frozen=True)
class Measurement:
    """One measured config. ``status == "failed"`` keeps ``reason`` and leaves the numbers None."""

    model: str
    mode: str  # inference | training
    device: str  # cpu | cuda
    precision: str  # fp32 | bf16 | fp16 | int8
    batch_size: int
    threads: int | None
    input: dict[str, int]  # e.g. {"seq_len": 64} or {"image_size": 224}
    status: Status
    reason: str | None = None
    latency_ms: LatencyStats | None = None  # per batch (training: per optimizer step)
    throughput_per_s: float | None = None  # samples per second at the median latency
    peak_memory_bytes: int | None = None  # CUDA: max_memory_allocated; CPU: peak RSS above baseline
    reserved_memory_bytes: int | None = None  # CUDA: max_memory_reserved
    context_memory_bytes: int | None = None  # CUDA context + library handles
    activation_bytes: int | None = None  # saved-for-backward tensors (training)
    flops_per_sample: float | None = None  # forward FLOPs (training: forward + backward)
    param_bytes: int | None = None
    buffer_bytes: int | None = None
    optimizer: str | None = None  # training
    loss: float | None = None  # training: last loss
    env_id: str | None = None  # fingerprint id of the machine that measured it
    tiny: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """Identity of the config (not the result): reruns with the same key reuse the stored result."""
        inp = ",".join(f"{k}={v}" for k, v in sorted(self.input.items()))
        opt = self.optimizer if self.mode == "training" else "-"
        return (
            f"{self.model}|{self.mode}|{self.device}|{self.precision}|b{self.batch_size}|t{self.threads}|{inp}|{opt}"
            f"|tiny={int(self.tiny)}"
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Measurement:
        d = dict(d)
        lat = d.get("latency_ms")
        if isinstance(lat, dict):
            d["latency_ms"] = LatencyStats(**lat)
        return cls(**d)


@dataclass(frozen=True)
class Profile:
    """Measurements of one model/mode/input on one machine, as the estimator consumes them."""

    model: str
    mode: str
    input: dict[str, int]
    env: dict[str, Any]  # environment fingerprint (see rightsize.measure.env)
    measurements: tuple[Measurement, ...]

    def ok(self, device: str | None = None, precision: str | None = None) -> list[Measurement]:
        return [
            m
            for m in self.measurements
            if m.status == "ok"
            and (device is None or m.device == device)
            and (precision is None or m.precision == precision)
        ]


@dataclass(frozen=True)
class ServiceCurve:
    """Batch service time t(b) on one device (per replica) and precision.

    ``latency_ms[i]`` is the median time to run a batch of ``batch_sizes[i]``; ``cv[i]`` its spread
    (std/mean) for the simulator; ``band_lo``/``band_hi`` multiply the median for the uncertainty
    band (1.0/1.0 when measured on that very device). Between points t is linear in b; beyond the
    last point it extends the last segment's slope (never below the last point's per-sample time).
    """

    device: str  # catalog accelerator name ("A10G") or CPU instance description ("cpu:c7i.2xlarge")
    precision: str
    batch_sizes: tuple[int, ...]
    latency_ms: tuple[float, ...]
    cv: tuple[float, ...]
    provenance: Provenance
    band_lo: float = 1.0
    band_hi: float = 1.0
    source: str = ""  # env id for measured; "roofline+calibration (…)" for projected
    memory_bytes: tuple[int | None, ...] | None = None  # peak memory per batch size, when known
    instance: str | None = None  # instance type this curve was built for, if specific

    def __post_init__(self) -> None:
        n = len(self.batch_sizes)
        if n == 0 or len(self.latency_ms) != n or len(self.cv) != n:
            raise ValueError("batch_sizes, latency_ms and cv must be non-empty and of equal length")
        if list(self.batch_sizes) != sorted(set(self.batch_sizes)):
            raise ValueError("batch_sizes must be strictly increasing")

    @property
    def max_batch(self) -> int:
        return self.batch_sizes[-1]

    def t_ms(self, batch: float) -> float:
        """Median service time of a batch of ``batch`` samples, milliseconds."""
        bs, ts = self.batch_sizes, self.latency_ms
        if batch <= bs[0]:
            return ts[0]  # a smaller batch is never modelled as faster than the smallest measured
        i = bisect.bisect_left(bs, batch)
        if i < len(bs) and bs[i] == batch:
            return ts[i]
        if i >= len(bs):
            if len(bs) == 1:
                return ts[0] * batch / bs[0]
            slope = max((ts[-1] - ts[-2]) / (bs[-1] - bs[-2]), ts[-1] / bs[-1] * 0.5, 0.0)
            return ts[-1] + slope * (batch - bs[-1])
        b0, b1, t0, t1 = bs[i - 1], bs[i], ts[i - 1], ts[i]
        return t0 + (t1 - t0) * (batch - b0) / (b1 - b0)

    def cv_at(self, batch: float) -> float:
        i = min(range(len(self.batch_sizes)), key=lambda k: abs(self.batch_sizes[k] - batch))
        return self.cv[i]

    def throughput_per_s(self, batch: float) -> float:
        t = self.t_ms(batch)
        return batch * 1000.0 / t if t > 0 else math.inf

    def best_throughput_batch(self) -> int:
        return max(self.batch_sizes, key=self.throughput_per_s)

    def scaled(self, factor: float, **changes: Any) -> ServiceCurve:
        """A copy with every latency multiplied by ``factor`` (and other fields replaced)."""
        d = asdict(self)
        d["latency_ms"] = tuple(t * factor for t in self.latency_ms)
        d["batch_sizes"] = tuple(self.batch_sizes)
        d["cv"] = tuple(self.cv)
        d.update(changes)
        return ServiceCurve(**d)
