"""rightsize from Python, as in a notebook: plan a spec, look at the candidates, write the report.

    .venv/bin/python examples/python_api.py [STORE]

Uses the tiny DistilBERT so it runs in about a minute on 2 quiet cores; drop ``tiny`` for the real model.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import rightsize.api as rs
from rightsize.measure.quality import measurement_quality
from rightsize.profile import Profile
from rightsize.units import format_usd

SPEC = {
    "name": "notebook-sentiment",
    "model": "distilbert",
    "tiny": True,
    "input": {"seq_len": 32},
    "batch_sizes": [1, 4, 16],
    "precisions": ["fp32", "int8"],
    "timing": {"max_time_s": 1.0, "max_repeats": 30},
    "targets": {"online": {"rate_per_s": 20, "latency": {"percentile": 95, "bound_ms": 100}}},
}


def show_profile(profile: Profile) -> None:
    """The measured configs with each one's timing quality, and what a disturbed timing means, under the table."""
    print(f"{len(profile.ok())} measured configs on {profile.env.cpu_model}")
    columns = ["precision", "batch_size", "p50_ms", "p95_ms", "throughput_per_s", "contended", "converged"]
    print(profile.to_dataframe()[columns].head(5))
    quality = measurement_quality(profile.measurements)
    if quality.problems:  # a contended row's latency is the busy machine's, not this model's
        print(f"warning: {quality.summary}: {quality.likely_effect}")


def main() -> None:
    store = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()) / "store.sqlite"
    spec = SPEC

    record = rs.plan(spec, store=store)  # measures this machine the first time, then reuses the store
    print(record)
    rec = record.recommendation
    assert rec is not None, record.why
    print(f"recommended: {rec.instance} ({rec.device_class}, {rec.precision}) at {format_usd(rec.cost_usd_per_hour)}/h")
    for line in record.why[1:]:
        print("  " + line)

    table = record.to_dataframe()
    print(table[["rank", "instance", "device", "precision", "cost_usd_per_hour", "p95_ms", "feasible"]].head(5))

    # the stored measurements the plan used; a config stored while the machine was busy is measured again
    profile = rs.measure(spec, store=store)
    show_profile(profile)

    report = record.report(store.parent / "notebook-report.html")
    print(f"report: {report}")
    print(f"stored as plan {record.plan_id}: `rightsize report {record.plan_id} --store {store}` writes it again")


if __name__ == "__main__":  # measuring starts child processes, which import this file again: guard it
    main()
