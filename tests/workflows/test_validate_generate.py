"""rightsize validate on a generative spec: the simulator replays a real server's levels (tiny decoder)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rightsize.errors import RunFailedError, SpecError
from rightsize.llm.costs import StepCosts
from rightsize.llm.sim import LLMSimConfig, simulate_llm
from rightsize.workflows.validate_generate import (
    MIN_LEVEL_REQUESTS,
    STRETCH,
    level_seconds,
    light_level_line,
    overheads,
    render_generative,
    summarise,
    validate_generative,
)


@pytest.mark.slow
def test_the_simulator_replays_each_level_of_the_real_server() -> None:
    # A level is valid only when every request was answered and the sender kept its schedule (p99 send lag); on a
    # busy 2-core machine the sender can fall behind, which the report rightly calls invalid: measure again then,
    # as the product's own re-measure rule does, up to three times.
    for _ in range(3):
        report = validate_generative("gpt2", "tiny", prompts=(8, 64), outputs=(4, 16), fractions=(0.5,),
                                     duration_s=3.0, max_seqs=4, kv_tokens=1024)  # fmt: skip
        (level,) = report["levels"]
        if level["valid"]:
            break
    assert level["valid"] and level["requests"] >= 5
    for q in ("ttft_p50", "ttft_p95", "tpot_p50"):
        assert level["measured"][q] > 0 and math.isfinite(level["forecast_err_pct"][q])
    assert level["measured"]["ttft_p50"] <= level["measured"]["ttft_p95"]
    assert report["costs"]["d0"] > 0 and report["engine"]["kv_tokens"] >= 2 * (384 + 96)
    # the level lasted long enough for MIN_LEVEL_REQUESTS (or its stretch cap), and says whether it is thin
    assert level["duration_s"] == pytest.approx(level_seconds(level["rate_per_s"], 3.0), rel=0.01)
    assert level["thin"] == (level["recorded"] < 20) and report["overheads"]["n"] >= 4
    assert ("thin: level(s)" in render_generative(report)) == level["thin"]
    s = summarise([report], "forecast")
    assert s["n"] == 3 and s["worst_abs_err_pct"] >= s["median_abs_err_pct"]


def test_levels_must_be_busy_fractions() -> None:
    with pytest.raises(SpecError, match="fractions"):
        validate_generative("gpt2", "tiny", fractions=(1.2,))


def test_overheads_pair_each_light_request_with_its_own_replay() -> None:
    # A light level whose client saw each request 7 ms late to its first token and 0.3 ms slower per token than
    # the engine's replay, with two requests far off (a stalled event loop): the medians recover 7 and 0.3, the
    # outliers move them little, and the count says how many were paired.
    costs, cfg = StepCosts(p0=5.0, p1=0.1, p2=0.0, d0=4.0, d1=0.5, d2=0.001), LLMSimConfig(max_seqs=4, kv_tokens=4096)
    offsets = np.arange(16) * 0.8
    prompts, outputs = np.arange(16) * 10 + 20, np.arange(16) % 5 + 8
    sim = simulate_llm(costs, cfg, arrivals_ms=offsets * 1e3, prompt_tokens=prompts, output_tokens=outputs,
                       record_from_ms=0.0)  # fmt: skip
    ttft, tpot = sim.ttft + 7.0, sim.tpot + 0.3
    ttft[3], tpot[9], ttft[12] = ttft[3] + 400.0, tpot[9] + 50.0, np.nan  # two outliers, one unanswered
    light = {"offsets": offsets, "prompts": prompts, "outputs": outputs, "ttft_ms": ttft, "tpot_ms": tpot}
    got = overheads(costs, cfg, light)
    assert got["ttft_ms"] == pytest.approx(7.0, abs=1e-6) and got["tpot_ms"] == pytest.approx(0.3, abs=1e-6)
    assert got["n"] == 15 and got["ttft_iqr_ms"] == pytest.approx(0.0, abs=1e-6)
    # Reversed, the pairs no longer line up: the estimate is no longer 7 (the test can fail).
    assert overheads(costs, cfg, light | {"ttft_ms": ttft[::-1]})["ttft_ms"] != pytest.approx(7.0, abs=0.5)
    with pytest.raises(RunFailedError, match="TTFT"):
        overheads(costs, cfg, light | {"ttft_ms": np.full(16, np.nan)})


def test_a_slow_models_levels_run_long_enough_for_their_requests() -> None:
    # 10 s at 0.5 req/s would hold 5 requests: the level runs for MIN_LEVEL_REQUESTS, capped at STRETCH x 10 s
    assert level_seconds(0.5, 10.0) == min(MIN_LEVEL_REQUESTS / 0.5, STRETCH * 10.0)
    assert level_seconds(0.1, 10.0) == STRETCH * 10.0
    assert level_seconds(50.0, 10.0) == 10.0  # a fast model's levels keep the duration asked for


def test_the_light_level_line_gives_its_requests_and_a_duration_that_is_not_zero() -> None:
    """A fast model's light level printed "a request every 0.02 s for 0 s": 16 requests over 0.32 s, rounded."""
    assert light_level_line(0.02, 16 * 0.02) == (
        "light level: 16 request(s), one every 0.02 s over 0.32 s, for the overheads"
    )
    assert light_level_line(1.5, 18.0) == "light level: 12 request(s), one every 1.5 s over 18 s, for the overheads"


def test_a_per_token_overhead_beyond_the_engines_own_step_is_doubted_in_the_report() -> None:
    """On a busy machine the light level gave 32.6 ms per token beside a 4.9 ms decode step, and the forecast added it
    to every level (+344%) with nothing said of it."""
    from rightsize.workflows.validate_generate import overhead_doubt, render_generative

    assert overhead_doubt(4.86, 0.76) is None and overhead_doubt(4.86, -1.0) is None  # within the step: plausible
    doubt = overhead_doubt(4.86, 32.56)
    assert doubt is not None and doubt.startswith("the per-token overhead 32.56 ms is 6.7x the engine's decode step")
    assert "below zero" in (overhead_doubt(4.86, -3.0) or "")
    costs = {"p0": 1.0, "p1": 0.1, "p2": 0.0, "d0": 4.5, "d1": 0.36, "d2": 0.0, "prefill_residual": 0.1,
             "decode_residual": 0.1}  # fmt: skip
    report = {"costs": costs, "overhead_ms": 10.0, "per_token_ms": 32.56, "overhead_doubt": doubt, "levels": []}
    assert f"doubt: {doubt}" in render_generative(report).splitlines()


def test_a_level_that_is_not_valid_says_why_and_is_left_out_of_the_summary() -> None:
    """`validate` printed a level `valid False` with no reason and counted its errors (up to 95%) in the summary."""
    from rightsize.workflows.validate_generate import render_generative

    def level(busy: float, valid: bool, err: float, problems: list[str]) -> dict[str, object]:
        q = {"ttft_p50": 10.0, "ttft_p95": 20.0, "tpot_p50": 5.0}
        errs = {k: err for k in q}
        return {"level_busy": busy, "rate_per_s": 1.0, "requests": 40, "valid": valid, "problems": problems,
                "recorded": 36, "thin": False, "measured": q, "forecast": q, "served": q,
                "forecast_err_pct": errs, "served_err_pct": errs}  # fmt: skip

    costs = {"p0": 1.0, "p1": 0.1, "p2": 0.0, "d0": 4.5, "d1": 0.36, "d2": 0.0, "prefill_residual": 0.1,
             "decode_residual": 0.1}  # fmt: skip
    lag = "send lag p99 41.0 ms > 20 ms"
    report = {"costs": costs, "overhead_ms": 1.0, "per_token_ms": 0.1, "overhead_doubt": None,
              "levels": [level(0.3, True, 5.0, []), level(0.85, False, 94.8, [lag])]}  # fmt: skip
    s = summarise([report], "forecast")
    assert (s["n"], s["worst_abs_err_pct"], s["invalid_levels"]) == (3, 5.0, 1)
    assert f"not valid: level 85% ({lag}); left out of the error summary" in render_generative(report).splitlines()
    none = summarise([report | {"levels": [level(0.85, False, 94.8, [lag])]}], "served")
    assert none["n"] == 0 and math.isnan(none["worst_abs_err_pct"]) and none["invalid_levels"] == 1


def test_a_server_slower_than_the_forecast_reads_positive() -> None:
    """Measured 20.9 ms against a forecast of 11.0 printed -47%, where single-size validate prints a slower
    measurement positive; the magnitude stays relative to the measurement (the benchmark's |error|)."""
    from rightsize.workflows.validate_generate import _err

    assert _err(11.0, 20.9) == pytest.approx(47.4, abs=0.05) and _err(14.88, 9.5) == pytest.approx(-56.6, abs=0.05)


def test_a_negative_or_spread_out_per_request_overhead_is_called_noise() -> None:
    """`validate --generate` on a busy machine printed "per-request overhead -8.5 ms ... (IQR 20.3 / 1.26 ms)" without
    comment, and the forecast subtracted it from every level's TTFT."""
    from rightsize.workflows.validate_generate import overhead_noise, render_generative

    assert overhead_noise(4.0, 2.0) is None and overhead_noise(4.0, None) is None  # clear of zero: a figure
    assert overhead_noise(-8.5, 20.3) == (
        "the per-request overhead -8.5 ms (IQR 20.3 ms: not distinguishable from 0; a busy machine?) is noise, and "
        "the forecast adds it to every level's TTFT"
    )
    assert overhead_noise(3.0, 20.3) is not None and overhead_noise(-0.5, None) is not None  # spans zero; below it
    costs = {"p0": 1.0, "p1": 0.1, "p2": 0.0, "d0": 4.5, "d1": 0.36, "d2": 0.0, "prefill_residual": 0.1,
             "decode_residual": 0.1}  # fmt: skip
    report = {"costs": costs, "overhead_ms": -8.5, "per_token_ms": 1.0, "overhead_doubt": None, "levels": [],
              "overheads": {"n": 16.0, "ttft_iqr_ms": 20.3, "tpot_iqr_ms": 1.26}}  # fmt: skip
    lines = render_generative(report).splitlines()
    assert (
        "per-request overhead -8.5 ms, per token 1.00 ms (medians of 16 paired requests, IQR 20.3 / 1.26 ms)"
        in lines[0]
    )
    assert f"noise: {overhead_noise(-8.5, 20.3)}" in lines
