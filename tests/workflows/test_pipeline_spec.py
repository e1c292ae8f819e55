"""`rightsize pipeline` runs and costs batch inference: a spec aimed at anything else is refused before it runs."""

from __future__ import annotations

import pytest

from rightsize.errors import SpecError
from rightsize.spec import Workload
from rightsize.workflows.pipeline import check_batch_spec, run_and_project


def _spec(targets: dict[str, object] | None, **over: object) -> Workload:
    return Workload.model_validate({"name": "p", "model": "simplenet", "tiny": True, "targets": targets} | over)


def test_a_training_spec_is_refused_before_the_pipeline_runs() -> None:
    """bert-finetune.yaml had run fp32 inference and costed 1,000,000 items, noting only "no batch deadline"."""
    train = _spec({"training": {"steps": 100}}, mode="training")
    with pytest.raises(SpecError, match=r"^targets\.training: `rightsize pipeline` runs and costs batch inference"):
        run_and_project(train, items=8)
    online = _spec({"online": {"rate_per_s": 5, "latency": {"percentile": 95, "bound_ms": 100}}})
    with pytest.raises(SpecError, match=r"^targets\.online: "):
        check_batch_spec(online)
    check_batch_spec(_spec(None))  # no targets: the pipeline costs the job with no deadline
    check_batch_spec(_spec({"batch": {"items": 100, "deadline_hours": 1}}))
