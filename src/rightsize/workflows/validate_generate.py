"""Validate the continuous-batching simulator against the real generation server on this machine.

    report = validate_generative("gpt2", "small", prompts=(32, 256), outputs=(16, 64))
    print(render_generative(report))

The truth is ``rightsize serve MODEL --generate`` (a real uvicorn server in a child process, the engine on
one torch thread) measured by the open-loop SSE client (``rightsize.llm.loadgen``) from each request's
intended send time. Steps:

1. **Calibrate**: a mixed load (prompts 16-384, outputs 8-96 tokens) and a burst of ``max_seqs`` requests at
   once, so the decode fit spans batch sizes 1..max_seqs; ``fit_step_costs`` on the server's own
   iteration log (GET /v1/iterations).
2. **Overheads** at a light level (``LIGHT_REQUESTS`` evenly spaced requests, one every ``LIGHT_GAP`` x a request's
   simulated time alone, so each mostly runs alone): per request, measured TTFT - simulated TTFT on the same
   arrival and lengths (HTTP, JSON, event loop), and measured TPOT - simulated (the engine thread -> event loop
   -> socket hand-off per token, which the iteration log does not time); their medians are added to every
   prediction. Until 2026-11-27 this was the difference of two p50s over a Poisson level at a quarter of the
   first level's rate, ~4 requests: runs whose every TTFT erred by the same +13 to +17% suggest it moved them.
3. **Levels**: Poisson rates at which the simulator keeps the engine ``fractions`` busy (30/60/85%); the
   schedule and lengths are fixed up front (seeded) and the simulator replays the same arrivals and
   lengths (``simulate_llm(arrivals_ms=...)``), the first ``WARMUP_SHARE`` not counted. A level lasts
   ``duration_s``, or long enough to send ``MIN_LEVEL_REQUESTS`` (up to ``STRETCH`` x ``duration_s``): a slow
   model's 10 s levels held 2-9 requests. A level that records fewer than ``THIN`` is flagged ``thin``.
4. **Compare** TTFT p50 / p95 and TPOT p50: ``forecast`` (calibrated costs) and ``served`` (costs refitted
   on the level's own iterations: isolates the policy from drift in step times).
"""

from __future__ import annotations

import json
import math
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from rightsize.errors import RunFailedError, SpecError
from rightsize.llm.costs import StepCosts, fit_step_costs
from rightsize.llm.loadgen import QUANTITIES, load_problems, run_generation_load
from rightsize.llm.sim import Lengths, LLMSimConfig, draw_lengths, simulate_llm
from rightsize.loadgen.schedule import Arrival, arrival_offsets_s, schedule_size

__all__ = ["LEVELS", "TARGET", "render_generative", "validate_generative"]

LEVELS = (0.30, 0.60, 0.85)  # simulated engine busy fraction of each level
TARGET = 0.20  # |error| bound of the target, per quantity
WARMUP_SHARE = 0.15
LIGHT_REQUESTS = 16  # the light level: this many evenly spaced requests, ...
LIGHT_GAP = 2.0  # ... one every LIGHT_GAP x a request's simulated time alone (mostly one at a time)
MIN_LEVEL_REQUESTS = 40  # a level lasts until this many requests are sent (a p95 over fewer rests on one or two) ...
STRETCH = 6.0  # ... but no longer than STRETCH x duration_s (the light level too)
THIN = 20  # a level with fewer recorded requests is flagged: its p95 is a single request's
Draw = Callable[[int, np.random.Generator], np.ndarray]


def _draw(spec: Lengths | Draw) -> Draw:
    if callable(spec):
        return spec
    return lambda n, rng: draw_lengths(spec, n, rng)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


@contextmanager
def local_server(config: dict[str, Any], start_timeout_s: float = 180.0) -> Iterator[str]:
    """The generation server for ``EngineConfig(**config)`` in a child process (its own GIL); yields its URL."""
    port = _free_port()
    code = ("import json, sys; from rightsize.llm.engine import EngineConfig; from rightsize.llm.server import "
            "serve_generate; serve_generate(EngineConfig(**json.loads(sys.argv[1])), '127.0.0.1', "
            "int(sys.argv[2]))")  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-c", code, json.dumps(config), str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + start_timeout_s
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = proc.stderr.read().decode(errors="replace")[-1500:] if proc.stderr else ""
                raise RunFailedError(f"the generation server did not start: {tail.strip() or 'timed out'}")
            try:
                with urllib.request.urlopen(url + "/readyz", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def _iterations(url: str, since: int) -> tuple[int, list[dict[str, Any]]]:
    got = _get(f"{url}/v1/iterations?since={since}")
    return int(got["next"]), list(got["iterations"])


def run_level(url: str, rate: float, duration_s: float, seed: int, prompts: Draw, outputs: Draw,
              arrival: Arrival = "poisson") -> dict[str, Any]:  # fmt: skip
    """One open-loop level: the schedule, the lengths, the client's summary, each request's TTFT and TPOT
    (ms; NaN where not answered) and the server's iterations."""
    offsets = arrival_offsets_s(rate, duration_s=duration_s, arrival=arrival, seed=seed)
    rng = np.random.default_rng(seed + 1000)
    p, o = prompts(offsets.size, rng), outputs(offsets.size, rng)
    start, _ = _iterations(url, 0)
    res = run_generation_load(url, offsets, p, o, seed=seed)
    _, its = _iterations(url, start)
    warm = float(offsets[int(offsets.size * WARMUP_SHARE)])
    recorded = int(np.count_nonzero(offsets >= warm))
    answered = [r if r.status == 200 and r.tokens > 0 else None for r in res.results]
    return {"offsets": offsets, "prompts": p, "outputs": o, "summary": res.summary(record_from_s=warm),
            "record_from_s": warm, "recorded": recorded, "iterations": its,
            "ttft_ms": np.array([r.ttft_ms if r else np.nan for r in answered]),
            "tpot_ms": np.array([r.tpot_ms if r else np.nan for r in answered])}  # fmt: skip


def simulate_level(costs: StepCosts, cfg: LLMSimConfig, level: dict[str, Any], overhead_ms: float = 0.0,
                   per_token_ms: float = 0.0) -> dict[str, float]:  # fmt: skip
    """The simulator replaying one level's arrivals and lengths."""
    res = simulate_llm(costs, cfg, arrivals_ms=level["offsets"] * 1e3, prompt_tokens=level["prompts"],
                       output_tokens=level["outputs"], record_from_ms=level["record_from_s"] * 1e3)  # fmt: skip
    return {"ttft_p50": res.ttft_ms["p50"] + overhead_ms, "ttft_p95": res.ttft_ms["p95"] + overhead_ms,
            "tpot_p50": res.tpot_ms["p50"] + per_token_ms, "busy": res.busy_fraction}  # fmt: skip


def overheads(costs: StepCosts, cfg: LLMSimConfig, light: dict[str, Any]) -> dict[str, float]:
    """What the client sees beyond the engine's iterations, from the light level: per request, measured minus
    simulated on the same arrival and lengths; the median (``ttft_ms``, ``tpot_ms``), its spread (``*_iqr_ms``)
    and the number of requests paired (``n``)."""
    res = simulate_llm(costs, cfg, arrivals_ms=light["offsets"] * 1e3, prompt_tokens=light["prompts"],
                       output_tokens=light["outputs"], record_from_ms=0.0)  # fmt: skip
    out: dict[str, float] = {"n": float(np.count_nonzero(np.isfinite(light["ttft_ms"] - res.ttft)))}
    for key, sim in (("ttft_ms", res.ttft), ("tpot_ms", res.tpot)):
        d = light[key] - sim
        d = d[np.isfinite(d)]
        if d.size == 0:
            raise RunFailedError(f"the light level answered no request with a {key[:4].upper()} to pair")
        q1, med, q3 = np.percentile(d, (25, 50, 75))
        out[key], out[f"{key[:4]}_iqr_ms"] = float(med), float(q3 - q1)
    return out


def alone_ms(costs: StepCosts, cfg: LLMSimConfig, prompts: Draw, outputs: Draw) -> float:
    """The mean time of one request served alone (its prefill and decode steps, nothing else running)."""
    rng = np.random.default_rng(11)
    p, o = prompts(200, rng), outputs(200, rng)
    res = simulate_llm(costs, cfg, arrivals_ms=np.arange(p.size) * 1e9, prompt_tokens=p, output_tokens=o,
                       record_from_ms=0.0)  # fmt: skip
    return float(np.nanmean(res.e2e))


def level_seconds(rate: float, duration_s: float) -> float:
    """A level's length: ``duration_s``, longer when that holds fewer than MIN_LEVEL_REQUESTS requests at ``rate``
    (a slow model's levels), at most STRETCH x ``duration_s``."""
    return min(max(duration_s, MIN_LEVEL_REQUESTS / rate), STRETCH * duration_s)


def rate_for_busy(costs: StepCosts, cfg: LLMSimConfig, busy: float, prompts: Draw, outputs: Draw) -> float:
    """The Poisson rate at which the simulator keeps the engine ``busy`` (bisection on a long run)."""
    rng = np.random.default_rng(7)
    p, o = prompts(1500, rng), outputs(1500, rng)
    lo, hi = 0.01, 500.0
    for _ in range(30):
        mid = (lo * hi) ** 0.5
        r = simulate_llm(costs, cfg, rate_per_s=mid, n_requests=p.size, prompt_tokens=p, output_tokens=o, seed=7)
        lo, hi = (mid, hi) if r.busy_fraction < busy else (lo, mid)
    return (lo * hi) ** 0.5


def _err(pred: float, meas: float) -> float:
    """The simulator's error against this server, (measured - predicted) / measured in percent: positive when the
    server was slower than predicted, the sign of single-size validate's err (it had been (predicted - measured) /
    measured: a forecast too fast printed negative, where validate prints a slower measurement positive)."""
    return round(100.0 * (meas - pred) / meas, 1) if meas else float("nan")


def _secs(s: float) -> str:
    """A duration a short run does not round to "0 s": two significant digits below 10 s ("0.32 s"), whole above."""
    return f"{s:.2g} s" if s < 10 else f"{s:.0f} s"


def light_level_line(gap_s: float, light_s: float) -> str:
    """The progress line of the light level: its requests and how long it lasts ("for 0 s" was 0.3 s rounded)."""
    n = schedule_size(1.0 / gap_s, duration_s=light_s)  # what run_level sends at this rate and length
    return f"light level: {n} request(s), one every {_secs(gap_s)} over {_secs(n * gap_s)}, for the overheads"


def validate_generative(
    model: str = "gpt2",
    size: str = "small",
    *,
    prompts: Lengths | Draw = (32, 256),
    outputs: Lengths | Draw = (16, 64),
    fractions: tuple[float, ...] = LEVELS,
    duration_s: float = 20.0,
    max_seqs: int = 16,
    kv_tokens: int = 8192,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Serve ``model`` here and compare the simulator with the server at each level (module docstring)."""
    if not fractions or any(not 0 < f < 1 for f in fractions):
        raise SpecError("fractions", f"each level must be a busy fraction in (0, 1), got {fractions}")
    say = progress or (lambda _msg: None)
    draw_p, draw_o = _draw(prompts), _draw(outputs)
    probe = np.random.default_rng(seed)
    longest_p = int(max(draw_p(2000, probe).max(), 384))
    longest_o = int(max(draw_o(2000, probe).max(), 96))
    kv = max(kv_tokens, 2 * (longest_p + longest_o))
    config: dict[str, Any] = {"model": model, "size": size, "max_seqs": max_seqs, "threads": 1, "seed": seed,
              "max_prompt_tokens": longest_p, "max_new_tokens": longest_o,
              "kv_tokens": kv}  # fmt: skip
    cfg = LLMSimConfig(max_seqs=max_seqs, kv_tokens=kv)
    say(f"starting the generation server ({model} {size}, {max_seqs} sequences, KV {config['kv_tokens']} tokens)")
    with local_server(config) as url:
        say("calibrating: a mixed load and a burst")
        mixed = run_level(url, 3.0, 12.0, seed + 1, _draw((16, 384)), _draw((8, 96)))
        burst = run_level(url, 1000.0, max_seqs / 1000.0, seed + 3, _draw((16, 256)), _draw((16, 96)))
        costs = fit_step_costs(mixed["iterations"] + burst["iterations"])
        rates = [rate_for_busy(costs, cfg, f, draw_p, draw_o) for f in fractions]
        gap_s = LIGHT_GAP * alone_ms(costs, cfg, draw_p, draw_o) / 1e3
        light_s = min(LIGHT_REQUESTS * gap_s, STRETCH * duration_s)
        say(light_level_line(gap_s, light_s))
        light = run_level(url, 1.0 / gap_s, light_s, seed + 2, draw_p, draw_o, "constant")
        over = overheads(costs, cfg, light)
        overhead, per_token = over["ttft_ms"], over["tpot_ms"]
        levels = []
        for i, (busy, rate) in enumerate(zip(fractions, rates, strict=True)):
            secs = level_seconds(rate, duration_s)
            say(f"level {i + 1}/{len(rates)}: {rate:.2f} req/s ({busy:.0%} busy in the simulator), {_secs(secs)}")
            lv = run_level(url, rate, secs, seed + 10 + i, draw_p, draw_o)
            s = lv["summary"]
            meas = {"ttft_p50": s["ttft_ms"]["p50"], "ttft_p95": s["ttft_ms"]["p95"], "tpot_p50": s["tpot_ms"]["p50"]}
            fc = simulate_level(costs, cfg, lv, overhead, per_token)
            sv = simulate_level(fit_step_costs(lv["iterations"]), cfg, lv, overhead, per_token)
            levels.append({
                "level_busy": busy, "rate_per_s": round(rate, 3), "requests": s["sent"], "valid": s["valid"],
                "problems": load_problems(s["sent"], s["answered"], s["send_lag_p99_ms"], s["recorded"]),
                "duration_s": round(secs, 1), "recorded": lv["recorded"], "thin": lv["recorded"] < THIN,
                "send_lag_p99_ms": round(s["send_lag_p99_ms"], 2),
                "measured": {k: round(v, 2) for k, v in meas.items()},
                "forecast": {k: round(v, 2) for k, v in fc.items()},
                "served": {k: round(v, 2) for k, v in sv.items()},
                "forecast_err_pct": {k: _err(fc[k], meas[k]) for k in QUANTITIES},
                "served_err_pct": {k: _err(sv[k], meas[k]) for k in QUANTITIES},
            })  # fmt: skip
    fields = ("p0", "p1", "p2", "d0", "d1", "d2", "prefill_residual", "decode_residual")
    return {"model": model, "size": size, "engine": config, "costs": {k: getattr(costs, k) for k in fields},
            "overhead_ms": round(overhead, 2), "per_token_ms": round(per_token, 3),
            "overhead_doubt": overhead_doubt(costs.d0 + costs.d1, per_token),
            "overheads": {k: round(v, 3) for k, v in over.items()}, "levels": levels}  # fmt: skip


def overhead_doubt(step_ms: float, per_token_ms: float) -> str | None:
    """Why the light level's per-token overhead is not what a client adds to this engine's tokens (None: it may be):
    more than the engine's own decode step of one sequence (``step_ms``), or below minus half of it. On a busy
    2-core machine it read 32.6 ms beside a 4.9 ms step, and the forecast added it to every level's TPOT (+344%)."""
    if -0.5 * step_ms <= per_token_ms <= step_ms:
        return None
    return (f"the per-token overhead {per_token_ms:.2f} ms is {abs(per_token_ms) / step_ms:.1f}x the engine's decode "
            f"step of one sequence ({step_ms:.2f} ms){' and below zero' if per_token_ms < 0 else ''}: the light "
            "level was disturbed (a busy machine?), and the forecast adds it to every level's TPOT, so its errors "
            "say more about that than about the simulator; run it again on a quiet machine")  # fmt: skip


def summarise(reports: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    """Median / worst |error| of ``kind`` ("forecast" | "served") over every valid level and quantity; a level whose
    load test was not valid (requests unanswered, a generator that sent late: ``problems``) is counted in
    ``invalid_levels``, not in the errors (its "measured" is not what the server does at that rate). NaN and 0 of 0
    when no level is valid."""
    valid = [lv for r in reports for lv in r["levels"] if lv.get("valid", True)]
    errs = [abs(v) for lv in valid for v in lv[f"{kind}_err_pct"].values()]
    n_levels = sum(len(r["levels"]) for r in reports)
    return {"median_abs_err_pct": float(np.median(errs)) if errs else math.nan,
            "worst_abs_err_pct": max(errs) if errs else math.nan,
            "within_20pct": sum(e <= 100 * TARGET for e in errs), "n": len(errs),
            "invalid_levels": n_levels - len(valid)}  # fmt: skip


def overhead_noise(overhead_ms: float, iqr_ms: float | None) -> str | None:
    """Why the light level's per-request overhead is no figure (None: it may be): below zero (a client cannot see a
    request sooner than the engine serves it), or nearer zero than half its IQR (the middle half of the paired
    differences spans zero). A busy 2-core machine read -8.5 ms at IQR 20.3 ms, printed without comment."""
    if overhead_ms >= 0 and (iqr_ms is None or overhead_ms > iqr_ms / 2):
        return None
    spread = f"IQR {iqr_ms:.1f} ms: " if iqr_ms is not None else ""
    return (
        f"the per-request overhead {overhead_ms:.1f} ms ({spread}not distinguishable from 0; a busy machine?) is "
        "noise, and the forecast adds it to every level's TTFT"
    )


def _spread(report: dict[str, Any]) -> str:
    o = report.get("overheads")
    if not o:
        return ""
    return f" (medians of {o['n']:.0f} paired requests, IQR {o['ttft_iqr_ms']:.1f} / {o['tpot_iqr_ms']:.2f} ms)"


def render_generative(report: dict[str, Any]) -> str:
    """The per-level table of one report."""
    c = report["costs"]
    lines = [
        f"fitted prefill {c['p0']:.2f} + {c['p1']:.4f} T + {c['p2']:.2e} T^2 ms "
        f"(fit residual {c['prefill_residual']:.0%}), "
        f"decode {c['d0']:.2f} + {c['d1']:.3f} B + {c['d2']:.5f} C ms (residual {c['decode_residual']:.0%}); "
        f"per-request overhead {report['overhead_ms']:.1f} ms, per token {report['per_token_ms']:.2f} ms"
        + _spread(report),
        f"{'busy':>5} {'rate/s':>7} {'n':>4} {'valid':>5} | {'quantity':<9} {'measured':>9} {'forecast':>9} {'err':>6} "
        f"{'served':>9} {'err':>6}",
    ]  # fmt: skip
    legend = "err: (measured - predicted) / measured; positive: this server was slower than predicted"
    thin = [f"{lv['level_busy']:.0%} ({lv['recorded']})" for lv in report["levels"] if lv.get("thin")]
    for lv in report["levels"]:
        for q in QUANTITIES:
            lines.append(
                f"{lv['level_busy']:>5.0%} {lv['rate_per_s']:>7.2f} {lv['requests']:>4} {lv['valid']!s:>5} | {q:<9} "
                f"{lv['measured'][q]:>9.1f} {lv['forecast'][q]:>9.1f} {lv['forecast_err_pct'][q]:>+5.0f}% "
                f"{lv['served'][q]:>9.1f} {lv['served_err_pct'][q]:>+5.0f}%"
            )
    for lv in report["levels"]:  # valid False had stood in the table with no reason, and in the summary's errors
        if not lv["valid"]:
            why = "; ".join(lv.get("problems") or []) or "see the load test's summary"
            lines.append(f"not valid: level {lv['level_busy']:.0%} ({why}); left out of the error summary")
    if thin:
        lines.append(f"thin: level(s) {', '.join(thin)} recorded fewer than {THIN} requests, so their p95 is one "
                     "request's and their errors are noise as much as the simulator's; a longer --duration "
                     "firms them")  # fmt: skip
    if doubt := report.get("overhead_doubt"):
        lines.append(f"doubt: {doubt}")
    o = report.get("overheads")
    if noise := overhead_noise(report["overhead_ms"], o.get("ttft_iqr_ms") if o else None):
        lines.append(f"noise: {noise}")
    if o and o["n"] < LIGHT_REQUESTS / 2:
        lines.append(f"thin: the overheads rest on {o['n']:.0f} light request(s); a longer --duration firms them")
    lines.append(legend)
    return "\n".join(lines)
