"""Scale-from-zero and cluster spin-up: time added to the first request or to a job, and the cost of
keeping replicas warm instead.

Defaults live in ``spec.targets.ColdStart`` (docs/sources.md `cold-start`: VM boot to SSH ~25 s; Kubernetes
autoscaler decision <= 30 s; CUDA images ~12 GB, 10-20 GB images take ~8-15 min to start cold).
A GPU image is larger than a CPU one; when the spec keeps the default pull time we scale it for GPU
instances by ``GPU_IMAGE_FACTOR`` (a 12 GB CUDA image vs a ~3 GB CPU image).
"""

from __future__ import annotations

from dataclasses import dataclass

from rightsize.spec.targets import ColdStart

__all__ = ["GPU_IMAGE_FACTOR", "IdlePolicy", "SpinUp", "choose_idle_policy", "idle_policies", "spin_up"]

GPU_IMAGE_FACTOR = 4.0  # CUDA images ~12 GB (docs/sources.md `cold-start`) vs ~3 GB for a slim CPU torch image
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


@dataclass(frozen=True)
class IdlePolicy:
    """What an online deployment does when traffic stops: keep ``warm`` instances, or scale to zero (0).

    The unit is the instance, what the cloud bills: a CPU instance running k worker processes keeps all k or none.
    Over a day with ``active_hours`` of traffic that resumes ``resumes`` times after idle: instances beyond the
    warm ones start on each resumption and take ``spin_up_s``; requests arriving meanwhile that the warm ones
    cannot carry wait for it, which misses any SLO shorter than the spin-up.
    """

    warm: int  # instances kept running through the idle hours
    usd_per_day: float
    late_fraction: float  # of the day's requests, waiting for a spin-up
    budget_fraction: float  # the SLO's allowance: 1 - percentile / 100
    spin_up_s: float
    replicas_per_instance: int = 1
    always_on_usd_per_day: float = 0.0

    @property
    def meets_slo(self) -> bool:
        return self.late_fraction <= self.budget_fraction

    def describe(self) -> str:
        if self.warm == 0:
            who = "scale to zero"
        else:
            reps = self.warm * self.replicas_per_instance
            who = f"keep {self.warm} instance(s) warm"
            who += f" ({reps} replicas)" if self.replicas_per_instance > 1 else ""
        return (
            f"{who}: ${self.usd_per_day:.2f}/day; {self.late_fraction:.2%} of requests wait for a "
            f"{self.spin_up_s:.0f} s spin-up (SLO allows {self.budget_fraction:.1%})"
        )

    def to_dict(self) -> dict[str, float | int | str]:
        """The numbers of ``describe`` for ``--json``."""
        return {
            "policy": "scale_to_zero" if self.warm == 0 else "keep_warm",
            "warm_instances": self.warm,
            "warm_replicas": self.warm * self.replicas_per_instance,
            "usd_per_day": round(self.usd_per_day, 4),
            "always_on_usd_per_day": round(self.always_on_usd_per_day, 4),
            "late_fraction": self.late_fraction,
            "slo_allowance": self.budget_fraction,
            "spin_up_s": self.spin_up_s,
        }


def idle_policies(
    instances: int,
    usd_per_instance_hour: float,
    rate_per_s: float,
    percentile: float,
    cold: ColdStart,
    gpu: bool,
    *,
    replicas_per_instance: int = 1,
    min_warm: int = 0,
    spare: int = 0,
) -> list[IdlePolicy]:
    """Scale-to-zero and keep-k-warm (k = ``min_warm`` .. ``instances``) for one candidate, cheapest first.
    ``spare``: instances that serve nothing (a spot plan's spare), so warm ones carry the load sooner."""
    up = spin_up(cold, gpu).total_s
    active = cold.active_hours_per_day
    requests = rate_per_s * active * 3600.0
    budget = max(0.0, 1.0 - percentile / 100.0)
    always = instances * usd_per_instance_hour * 24.0
    out = []
    for warm in range(min(max(0, min_warm), instances), instances + 1):
        idle_cost = warm * usd_per_instance_hour * (24.0 - active)
        busy_cost = instances * usd_per_instance_hour * active + (instances - warm) * usd_per_instance_hour * (
            cold.resumes_per_day * up / 3600.0
        )
        # On each resumption the warm instances carry warm/serving of the load; the rest waits for the spin-up.
        serving = max(1, instances - spare)
        short = max(0, serving - warm) / serving
        late = cold.resumes_per_day * rate_per_s * min(up, active * 3600.0) * short / requests if requests else 0.0
        out.append(IdlePolicy(warm, idle_cost + busy_cost, min(1.0, late), budget, up, replicas_per_instance, always))
    return sorted(out, key=lambda p: (p.usd_per_day, -p.warm))


def choose_idle_policy(policies: list[IdlePolicy]) -> IdlePolicy:
    """The cheapest policy that keeps the SLO's percentile; keeping every instance warm always does."""
    return next((p for p in policies if p.meets_slo), max(policies, key=lambda p: p.warm))
