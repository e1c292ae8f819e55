"""A model's ops, traced rather than timed (``rightsize.estimate.work``): what the projection prices on hardware this
machine lacks. Re-exported by ``rightsize.profile``, the data flow's other plain values."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["OP_CLASSES", "WorkProfile"]


OP_CLASSES = ("gemm", "conv", "attention", "memory", "host")


@dataclass(frozen=True)
class WorkProfile:
    """A model's ops (traced, not timed; see ``rightsize.estimate.work``), linear in the batch size.

    ``ops[i] = (op_class, count, flops_b1, flops_b2, bytes_b1, bytes_b2)``: ``count`` identical ops whose
    FLOPs and bytes moved (fp32 tensors read + written) at batch 1 and 2 extend linearly to any batch.
    ``op_class`` is one of OP_CLASSES; "host" ops (views, allocations) launch no device kernel.
    """

    model: str
    mode: str
    input: dict[str, int]
    tiny: bool
    ops: tuple[tuple[str, int, float, float, float, float], ...]
    n_params: int
    param_tensors: int
    trace_s: float = 0.0

    def at(self, batch: float) -> list[tuple[str, int, float, float]]:
        """(op_class, count, FLOPs, bytes) of every op at ``batch``."""
        return [(c, n, f1 + (f2 - f1) * (batch - 1), b1 + (b2 - b1) * (batch - 1)) for c, n, f1, f2, b1, b2 in self.ops]

    def flops(self, batch: float) -> float:
        return sum(n * f for _, n, f, _ in self.at(batch))

    def n_ops(self, op_class: str | None = None) -> int:
        """Dispatched ops (``op_class=None``) or ops of one class."""
        return sum(n for c, n, *_ in self.ops if op_class is None or c == op_class)

    @property
    def n_kernels(self) -> int:
        return sum(n for c, n, *_ in self.ops if c != "host")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ops"] = [list(o) for o in self.ops]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WorkProfile:
        d = dict(d)
        d["ops"] = tuple((str(o[0]), int(o[1]), *map(float, o[2:6])) for o in d["ops"])
        return cls(**d)
