"""rightsize validate on a request mix: the served batch times, the lane replay, and a real two-lane server."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_an_unknown_fleet_choice_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rightsize.cli.app import main

    spec = tmp_path / "w.yaml"
    spec.write_text("model: simplenet\ntiny: true\n")
    with pytest.raises(SystemExit) as exc:
        main(["validate", str(spec), "--fleet", "both", "--no-store"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "--fleet" in err and "Traceback" not in err


@pytest.mark.slow
def test_a_size_split_is_served_on_two_lanes_and_replayed_per_class(tmp_path: Path) -> None:
    """mobilenet_v2 at 64 px: 1-image requests on one lane, 8-image requests on the other, both classes sent
    at once; each class's measured p50 against the simulator given the server's own batch times. `threads: [1]`:
    each lane's thread count on a 2-core machine, so the profile holds the lanes' curves (with all cores they are timed
    again for the check, not stored)."""
    from rightsize.spec import load_spec
    from rightsize.store import Store
    from rightsize.workflows.validate_mix import render_mix_report, validate_mix

    spec = tmp_path / "mix.yaml"
    spec.write_text(
        "name: mix\nmodel: mobilenet_v2\ninput: {image_size: 64}\nbatch_sizes: [1, 8]\nprecisions: [fp32]\n"
        "devices: [cpu]\nthreads: [1]\ntiming: {warmup: 1, min_repeats: 3, max_repeats: 8, max_time_s: 1}\n"
        "targets:\n  online:\n    rate_per_s: 20\n    latency: {percentile: 95, bound_ms: 300}\n"
        "    request_mix: [{samples: 1, share: 0.75}, {samples: 8, share: 0.25}]\n"
    )
    report = validate_mix(
        load_spec(spec), Store(tmp_path / "s.sqlite"), fleet="split", fractions=(0.5,), duration_s=3.0,
        warmup_s=0.5, progress=False, min_requests=40,
    )  # fmt: skip
    text = render_mix_report(report)
    assert report["layout"] == "split" and report["crossover_samples"] == 8, text
    assert [lane["name"] for lane in report["lanes"]] == ["small", "large"]
    (level,) = report["points"]
    assert all(lane["batches"] > 0 for lane in level["lanes"]), text
    by_size = {c["samples"]: c for c in level["classes"]}
    assert by_size[1]["lane"] == "small" and by_size[8]["lane"] == "large"
    for c in by_size.values():
        assert c["measured_ms"] is not None and c["predicted_served_ms"] is not None, text
        assert c["predicted_ms"] is not None and c["predicted_served_ms"]["p95_range"][0] > 0
    if not all(c["valid"] for c in by_size.values()):
        pytest.skip("a generator fell behind: this machine is overloaded\n" + text)
    # An 8-image request takes longer than a 1-image one, measured and predicted alike.
    assert by_size[8]["measured_ms"]["p50"] > by_size[1]["measured_ms"]["p50"], text
    assert by_size[8]["predicted_served_ms"]["p50"] > by_size[1]["predicted_served_ms"]["p50"], text
    # Half load: the median is set by batch times and the serving overhead, both measured here.
    for c in by_size.values():
        err = abs(c["predicted_served_ms"]["p50"] / c["measured_ms"]["p50"] - 1)
        assert err < 0.5, text
    assert report["served_error_pct"]["n"] >= 2
    assert report["slo_verdict"].startswith("SLO p95 <= 300 ms for every size class here: ") and "at 50%" in text


def test_a_request_far_beyond_the_measured_batches_is_refused_before_serving(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 1,000,000-sample request would make the server's warm-up allocate a million images: one line, exit 2 —
    before the sweep (it measured every batch size first, and no batch size the spec lists could have passed)."""
    from rightsize.cli.app import main

    spec = tmp_path / "huge.yaml"
    spec.write_text(
        "name: huge\nmodel: simplenet\ntiny: true\nbatch_sizes: [1, 8]\nprecisions: [fp32]\ndevices: [cpu]\n"
        "timing: {warmup: 1, min_repeats: 3, max_repeats: 5, max_time_s: 1}\n"
        "targets:\n  online:\n    rate_per_s: 5\n    latency: {percentile: 95, bound_ms: 100000}\n"
        "    request_mix: [{samples: 1, share: 0.5}, {samples: 1000000, share: 0.5}]\n"
    )
    with pytest.raises(SystemExit) as exc:
        main(["validate", str(spec), "--store", str(tmp_path / "s.sqlite"), "--no-store", "--json"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "request_mix" in err and "batch_sizes" in err and "Traceback" not in err
    assert err.strip().splitlines() == [err.strip()]  # the one line: no "rightsize: measuring ..." before it
    assert "(1000000 samples) is over 4x the spec's largest batch size (8); add batch sizes up to it" in err


def test_a_lanes_planned_pool_says_replicas_on_instances() -> None:
    from rightsize.workflows.validate_mix_report import _planned_words

    assert _planned_words({"replicas": 4, "count": 1, "instance": "c7i.2xlarge"}) == "4 replicas on 1 x c7i.2xlarge"
    assert _planned_words({"replicas": 2, "count": 2, "instance": "g5.xlarge"}) == "2 x g5.xlarge"
    assert _planned_words({"replicas": 3, "instance": "g5.xlarge"}) == "3 x g5.xlarge"  # no count: as before


def test_the_mix_verdict_names_the_level_and_the_class_that_missed() -> None:
    """`validate --fleet split` printed every class's numbers and no answer: met or missed, and by which class."""
    from rightsize.workflows.validate_mix_report import mix_slo_verdict

    def cls(samples: int, p95: float, valid: bool = True, errors: float = 0.0) -> dict[str, object]:
        return {"samples": samples, "valid": valid, "error_fraction": errors,
                "measured_ms": {"p50": p95 / 2, "p95": p95}}  # fmt: skip

    points = [{"label": "50%", "classes": [cls(1, 40.0), cls(8, 120.0)]},
              {"label": "80%", "classes": [cls(1, 60.0), cls(8, 412.0)]},
              {"label": "95%", "classes": [cls(1, 70.0), cls(8, 150.0, errors=0.02)]}]  # fmt: skip
    text = mix_slo_verdict(points, 95.0, 300.0, 0.8)
    assert text is not None and text.startswith("SLO p95 <= 300 ms for every size class here: ")
    assert "met at 50% (slowest: 8-sample class, p95 120.0 ms)" in text
    assert "missed at 80% by the 8-sample class: p95 412.0 ms" in text
    assert "missed at 95%: the 8-sample run was invalid or dropped requests" in text and "at most 80% busy" in text
    assert mix_slo_verdict([{"label": "50%", "classes": [cls(1, 40.0)]}], 99.9, 300.0, 0.8) is None  # not measured


def test_a_busy_level_of_the_mix_is_not_judged() -> None:
    """`validate --fleet split` beside a CPU hog said "met"/"missed" from this machine's load, not the plan's."""
    from rightsize.workflows.validate_mix_report import mix_slo_verdict
    from rightsize.workflows.validate_run import BUSY_EFFECT, busy_cause

    busy = f"{busy_cause(0.57)}: {BUSY_EFFECT}"
    quiet = {"samples": 1, "valid": True, "error_fraction": 0.0, "measured_ms": {"p50": 20.0, "p95": 40.0}}
    loud = {"samples": 8, "valid": False, "error_fraction": 0.0, "problems": [busy],
            "measured_ms": {"p50": 300.0, "p95": 900.0}}  # fmt: skip
    points = [{"label": "50%", "classes": [quiet, {**quiet, "samples": 8}]},
              {"label": "80%", "classes": [{**quiet, "problems": [busy], "valid": False}, loud]}]  # fmt: skip
    text = mix_slo_verdict(points, 95.0, 300.0, 0.8)
    assert text is not None and "met at 50%" in text
    assert "not judged at 80%: other processes kept 57% of this machine's cores busy during this level" in text
    assert "missed" not in text


def test_the_mix_error_reads_as_single_size_validate_s() -> None:
    """A measured p50 of 153 ms against a predicted 996 ms printed +551%: (pred - meas) / meas, the sign and the base
    of single-size validate's (meas - pred) / pred turned round."""
    from rightsize.workflows.validate_mix_report import _err

    assert _err({"p50": 996.0}, {"p50": 153.0}, "p50") == pytest.approx(100 * (153 - 996) / 996)  # -85%: faster
    assert _err({"p95": 1384.0}, {"p95": 1503.2}, "p95") == pytest.approx(100 * (1503.2 - 1384) / 1384)  # +9%: slower
    assert _err(None, {"p95": 1.0}, "p95") is None and _err({"p95": 1.0}, {}, "p95") is None
