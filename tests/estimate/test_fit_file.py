"""The shipped projection_fit.json is what scripts/fit_projection.py computes from the shipped data."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

from rightsize.catalog import load_catalog
from rightsize.estimate.calibration import calibration_dir
from rightsize.estimate.fitting import fit_payload, run_reference_evaluation
from rightsize.estimate.projection import FIT_FILE, load_projection_model


@pytest.mark.slow
def test_shipped_fit_matches_a_refit() -> None:
    shipped = json.loads((calibration_dir() / FIT_FILE).read_text(encoding="utf-8"))
    ev, _, inputs = run_reference_evaluation(load_catalog(""))
    fresh = fit_payload(ev, inputs)
    assert shipped["inputs"]["reference_sha256"] == fresh["inputs"]["reference_sha256"], (
        "re-run scripts/fit_projection.py"
    )
    for group in ("gpu", "cpu"):
        for name, value in fresh[group].items():
            assert shipped[group][name] == pytest.approx(value, rel=0.02), (group, name)
    for dc, band in fresh["bands"].items():
        assert shipped["bands"][dc]["lo"] == pytest.approx(band["lo"], rel=0.02)
        assert shipped["bands"][dc]["hi"] == pytest.approx(band["hi"], rel=0.02)
    model = load_projection_model()
    assert model.band("gpu").lo < 1 < model.band("gpu").hi and model.band("cpu").n > 0
