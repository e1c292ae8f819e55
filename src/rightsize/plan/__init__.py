"""Planning: queueing simulation, online / batch / training planners, spot model, rules. No torch here.

from rightsize.plan import plan, MemoryModel
result = plan(workload, curves, catalog, memory={"fp32": MemoryModel(fixed_bytes=4e8, per_sample_bytes=2e6)})
"""

from rightsize.plan.options import MemoryModel, Option, pair_options
from rightsize.plan.planner import plan, plan_kind
from rightsize.plan.result import Batching, Candidate, LatencyPrediction, PlanResult, SpotPlan
from rightsize.plan.sim import SimConfig, SimResult, simulate

__all__ = [
    "Batching",
    "Candidate",
    "LatencyPrediction",
    "MemoryModel",
    "Option",
    "PlanResult",
    "SimConfig",
    "SimResult",
    "SpotPlan",
    "pair_options",
    "plan",
    "plan_kind",
    "simulate",
]
