"""Scale-from-zero and cluster spin-up: time added to the first request or to a job, and the cost of
keeping replicas warm instead.

Defaults live in ``spec.targets.ColdStart`` (REFERENCE.md §4: VM boot to SSH ~25 s; Kubernetes
autoscaler decision <= 30 s; CUDA images ~12 GB, 10-20 GB images take ~8-15 min to start cold).
A GPU image is larger than a CPU one; when the spec keeps the default pull time we scale it for GPU
instances by ``GPU_IMAGE_FACTOR`` (a 12 GB CUDA image vs a ~3 GB CPU image).
"""

from __future__ import annotations

from dataclasses import dataclass

from rightsize.spec.targets import ColdStart

__all__ = ["GPU_IMAGE_FACTOR", "SpinUp", "spin_up"]

GPU_IMAGE_FACTOR = 4.0  # CUDA images ~12 GB (REFERENCE.md §4) vs ~3 GB for a slim CPU torch image
_DEFAULT_PULL_S = ColdStart.model_validate({}).image_pull_s


@dataclass(frozen=True)
class SpinUp:
    """Seconds from "need a replica" to "replica serves", by part."""

    provision_s: float
    image_pull_s: float
    model_load_s: float

    @property
    def total_s(self) -> float:
        return self.provision_s + self.image_pull_s + self.model_load_s

    @property
    def total_hours(self) -> float:
        return self.total_s / 3600.0

    def describe(self) -> str:
        return (
            f"{self.total_s:.0f} s (provision {self.provision_s:.0f} s + image pull {self.image_pull_s:.0f} s "
            f"+ model load {self.model_load_s:.0f} s)"
        )


def spin_up(cold: ColdStart, gpu: bool) -> SpinUp:
    """Spin-up of one replica or node; GPU images pull longer unless the spec set the pull time."""
    pull = cold.image_pull_s
    if gpu and pull == _DEFAULT_PULL_S:
        pull *= GPU_IMAGE_FACTOR
    return SpinUp(cold.provision_s, pull, cold.model_load_s)
