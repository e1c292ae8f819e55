"""The continuous-batching simulator against the real generation server, on this machine, at 3 load levels.

    .venv/bin/python benchmarks/llm_sim_vs_server.py               # ~2-3 min on 2 cores
    .venv/bin/python benchmarks/llm_sim_vs_server.py --repeat 2 --json

Truth: ``rightsize serve gpt2 --generate --size small`` (a real uvicorn server, the engine's continuous
batching on one torch thread) measured by the open-loop SSE client (``rightsize.llm.loadgen``): TTFT and
TPOT as a client sees them, from each request's intended send time.

1. **Calibrate.** A mixed load (prompts 16-384 tokens, outputs 8-96) and a burst of 16 requests at once
   (batch sizes up to the cap) run first; ``fit_step_costs`` fits prefill and decode step times to the
   server's own iteration log (GET /v1/iterations). A light level
   (one request at a time, mostly) then gives the per-request overhead outside the engine's iterations
   (HTTP, JSON, event loop): measured TTFT p50 - simulated TTFT p50, added to every TTFT prediction, and
   per streamed token (the engine thread -> event loop -> socket hand-off the iteration log does not
   time): measured TPOT p50 - simulated TPOT p50, added to every TPOT prediction.
2. **Levels.** Three Poisson rates: where the simulator, on the calibrated costs, keeps the engine 30%,
   60% and 85% busy. Each level's schedule and lengths are fixed up front (seeded); the simulator replays
   the same arrivals and lengths (``simulate_llm(arrivals_ms=...)``), warm-up requests not counted.
3. **Compare.** TTFT p50 / p95 and TPOT p50: simulated vs measured, per level; the target is every one
   within 20%. Two predictions: ``forecast`` (calibrated costs only) and ``served`` (costs refitted on the
   level's own iterations: isolates the simulator's policy from drift in step times).

It also prints the roofline projection for this CPU (``project_step_costs`` with the catalog family this
machine matches, one core) beside the fitted step times: the check of the CPU efficiencies the planner
uses for CPU candidates, on a real run.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from typing import Any

import numpy as np

from rightsize.llm.costs import StepCosts, fit_step_costs, project_step_costs
from rightsize.llm.loadgen import run_generation_load
from rightsize.llm.sim import LLMSimConfig, simulate_llm
from rightsize.loadgen.schedule import arrival_offsets_s

MODEL, SIZE, MAX_SEQS, KV_TOKENS = "gpt2", "small", 16, 8192
PROMPTS, OUTPUTS = (32, 256), (16, 64)
LEVELS = (0.30, 0.60, 0.85)  # simulated engine busy fraction
TARGET = 0.20
WARMUP_SHARE = 0.15


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def start_server() -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    cmd = [sys.executable, "-m", "rightsize", "serve", MODEL, "--generate", "--size", SIZE, "--threads", "1",
           "--max-seqs", str(MAX_SEQS), "--kv-tokens", str(KV_TOKENS), "--port", str(port)]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/readyz", timeout=2) as r:
                if r.status == 200:
                    return proc, url
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise SystemExit(
        f"the generation server did not become ready: {proc.stderr.read().decode()[-2000:] if proc.stderr else ''}"
    )


def iterations(url: str, since: int) -> tuple[int, list[dict[str, Any]]]:
    got = _get(f"{url}/v1/iterations?since={since}")
    return int(got["next"]), list(got["iterations"])


def load(url: str, rate: float, duration_s: float, seed: int, prompts: tuple[int, int], outputs: tuple[int, int]
         ) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, Any], list[dict[str, Any]]]:  # fmt: skip
    """One open-loop level: (offsets s, prompts, outputs, client summary, the server's iterations)."""
    offsets = arrival_offsets_s(rate, duration_s=duration_s, seed=seed)
    rng = np.random.default_rng(seed + 1000)
    p = rng.integers(prompts[0], prompts[1] + 1, offsets.size)
    o = rng.integers(outputs[0], outputs[1] + 1, offsets.size)
    start, _ = iterations(url, 0)
    res = run_generation_load(url, offsets, p, o, seed=seed)
    _, its = iterations(url, start)
    warm = float(offsets[int(offsets.size * WARMUP_SHARE)])
    return offsets, p, o, res.summary(record_from_s=warm) | {"record_from_s": warm}, its


def simulate(costs: StepCosts, offsets: np.ndarray, p: np.ndarray, o: np.ndarray, warm_s: float,
             overhead_ms: float = 0.0, per_token_ms: float = 0.0) -> dict[str, float]:  # fmt: skip
    res = simulate_llm(costs, LLMSimConfig(max_seqs=MAX_SEQS, kv_tokens=KV_TOKENS), arrivals_ms=offsets * 1e3,
                       prompt_tokens=p, output_tokens=o, record_from_ms=warm_s * 1e3)  # fmt: skip
    return {"ttft_p50": res.ttft_ms["p50"] + overhead_ms, "ttft_p95": res.ttft_ms["p95"] + overhead_ms,
            "tpot_p50": res.tpot_ms["p50"] + per_token_ms, "busy": res.busy_fraction}  # fmt: skip


def rate_for_busy(costs: StepCosts, busy: float) -> float:
    """The Poisson rate at which the simulator keeps the engine ``busy`` (bisection on a long run)."""
    lo, hi = 0.01, 200.0
    for _ in range(30):
        mid = (lo * hi) ** 0.5
        r = simulate_llm(costs, LLMSimConfig(max_seqs=MAX_SEQS, kv_tokens=KV_TOKENS), rate_per_s=mid,
                         n_requests=1500, prompt_tokens=PROMPTS, output_tokens=OUTPUTS, seed=7)  # fmt: skip
        lo, hi = (mid, hi) if r.busy_fraction < busy else (lo, mid)
    return (lo * hi) ** 0.5


def roofline_here(fitted: StepCosts) -> dict[str, Any]:
    """This CPU's catalog family, one core: projected vs fitted step times (the CPU efficiencies' check)."""
    from rightsize.catalog import load_catalog
    from rightsize.catalog.query import match_cpu_family
    from rightsize.llm.shape import DecoderShape
    from rightsize.measure.env import fingerprint

    catalog = load_catalog()
    fam = match_cpu_family(catalog.cpus, fingerprint())
    if fam is None:
        return {"family": None}
    from rightsize.llm.decoder import lm_config

    shape = DecoderShape.from_hf_config(lm_config(MODEL, SIZE))
    proj = project_step_costs(shape, fam, "fp32", "fp32", cores=1)
    points = {"prefill_128": (proj.prefill_ms(128), fitted.prefill_ms(128)),
              "decode_b1": (proj.decode_ms(1, 150), fitted.decode_ms(1, 150)),
              "decode_b8": (proj.decode_ms(8, 8 * 150), fitted.decode_ms(8, 8 * 150))}  # fmt: skip
    return {"family": fam.name, "points": {k: {"projected_ms": round(a, 2), "measured_ms": round(b, 2),
                                               "ratio": round(a / b, 2)} for k, (a, b) in points.items()}}  # fmt: skip


def err(pred: float, meas: float) -> float:
    return 100.0 * (pred - meas) / meas if meas else float("nan")


def run_once(url: str, duration_s: float, seed: int) -> dict[str, Any]:
    # 1. calibrate on a mixed load and a burst of MAX_SEQS requests at once (so the decode fit spans batch
    #    sizes 1..MAX_SEQS, not only the few a light load forms), then the light level for the overhead
    _, _, _, _, cal = load(url, 3.0, 12.0, seed + 1, (16, 384), (8, 96))
    _, _, _, _, burst = load(url, 1000.0, MAX_SEQS / 1000.0, seed + 3, (16, 256), (16, 96))
    costs = fit_step_costs(cal + burst)
    rates = [rate_for_busy(costs, b) for b in LEVELS]
    off, p, o, light, _ = load(url, rates[0] / 4, min(duration_s, 12.0), seed + 2, PROMPTS, OUTPUTS)
    at_light = simulate(costs, off, p, o, light["record_from_s"])
    overhead = light["ttft_ms"]["p50"] - at_light["ttft_p50"]
    per_token = light["tpot_ms"]["p50"] - at_light["tpot_p50"]
    rows = []
    for i, (busy, rate) in enumerate(zip(LEVELS, rates, strict=True)):
        off, p, o, meas, its = load(url, rate, duration_s, seed + 10 + i, PROMPTS, OUTPUTS)
        warm = meas["record_from_s"]
        fc = simulate(costs, off, p, o, warm, overhead, per_token)
        sv = simulate(fit_step_costs(its), off, p, o, warm, overhead, per_token)
        m = {"ttft_p50": meas["ttft_ms"]["p50"], "ttft_p95": meas["ttft_ms"]["p95"], "tpot_p50": meas["tpot_ms"]["p50"]}
        rows.append({
            "level_busy": busy, "rate_per_s": round(rate, 3), "requests": meas["sent"], "valid": meas["valid"],
            "send_lag_p99_ms": round(meas["send_lag_p99_ms"], 2), "measured": {k: round(v, 2) for k, v in m.items()},
            "forecast": {k: round(v, 2) for k, v in fc.items()}, "served": {k: round(v, 2) for k, v in sv.items()},
            "forecast_err_pct": {k: round(err(fc[k], m[k]), 1) for k in m},
            "served_err_pct": {k: round(err(sv[k], m[k]), 1) for k in m},
        })  # fmt: skip
    return {"costs": {k: getattr(costs, k) for k in ("p0", "p1", "p2", "d0", "d1", "d2", "prefill_residual",
                                                       "decode_residual")},
            "overhead_ms": round(overhead, 2), "per_token_ms": round(per_token, 3), "levels": rows,
            "roofline_here": roofline_here(costs)}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--duration-s", type=float, default=20.0, help="seconds of load per level")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    load_before = os.getloadavg()[0]
    proc, url = start_server()
    try:
        runs = [run_once(url, args.duration_s, 100 * k) for k in range(max(1, args.repeat))]
    finally:
        proc.terminate()
        proc.wait(30)
    out: dict[str, Any] = {"runs": runs, "load_avg_before": load_before, "load_avg_after": os.getloadavg()[0]}
    for kind in ("forecast", "served"):
        errs = [abs(v) for r in runs for lv in r["levels"] for v in lv[f"{kind}_err_pct"].values()]
        out[kind] = {"median_abs_err_pct": statistics.median(errs), "worst_abs_err_pct": max(errs),
                     "within_20pct": sum(e <= 100 * TARGET for e in errs), "n": len(errs)}  # fmt: skip
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    for k, r in enumerate(runs):
        c = r["costs"]
        print(f"run {k + 1}: fitted prefill {c['p0']:.2f} + {c['p1']:.4f} T + {c['p2']:.2e} T^2 ms (fit residual "
              f"{c['prefill_residual']:.0%}), decode {c['d0']:.2f} + {c['d1']:.3f} B + {c['d2']:.5f} C ms (residual "
              f"{c['decode_residual']:.0%}); per-request overhead {r['overhead_ms']:.1f} ms, per token "
              f"{r['per_token_ms']:.2f} ms")  # fmt: skip
        print(f"{'busy':>5} {'rate/s':>7} {'n':>4} {'valid':>5} | {'quantity':<9} {'measured':>9} {'forecast':>9} "
              f"{'err':>6} {'served':>9} {'err':>6}")  # fmt: skip
        for lv in r["levels"]:
            for q in ("ttft_p50", "ttft_p95", "tpot_p50"):
                print(f"{lv['level_busy']:>5.0%} {lv['rate_per_s']:>7.2f} {lv['requests']:>4} {lv['valid']!s:>5} | "
                      f"{q:<9} {lv['measured'][q]:>9.1f} {lv['forecast'][q]:>9.1f} {lv['forecast_err_pct'][q]:>+5.0f}% "
                      f"{lv['served'][q]:>9.1f} {lv['served_err_pct'][q]:>+5.0f}%")  # fmt: skip
        rh = r["roofline_here"]
        if rh.get("family"):
            pts = ", ".join(f"{n} {v['projected_ms']:.1f} vs {v['measured_ms']:.1f} ms (x{v['ratio']:.2f})"
                            for n, v in rh["points"].items())  # fmt: skip
            print(f"roofline for this CPU ({rh['family']}, 1 core) vs fitted: {pts}")
    for kind in ("forecast", "served"):
        s = out[kind]
        verdict = "PASS" if s["worst_abs_err_pct"] <= 100 * TARGET else "FAIL"
        print(f"{kind}: median |error| {s['median_abs_err_pct']:.1f}%, worst {s['worst_abs_err_pct']:.1f}%, "
              f"within 20%: {s['within_20pct']}/{s['n']} (target: all within 20%: {verdict})")  # fmt: skip
    print(f"load average before {load_before:.2f}, after {out['load_avg_after']:.2f} (2 cores; > 2.5 means a busy run)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
