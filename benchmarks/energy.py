"""Energy per inference and per job, from published throughput and the product's power model.

    .venv/bin/python benchmarks/energy.py

For every (model, mode, device) in the reference set (catalog/data/reference/published.csv, each row with
its source) the best published throughput is turned into energy with rightsize's power model
(catalog/data/power.csv: Cloud Carbon Footprint's per-device and per-vCPU watts; a GPU without a row uses
11.5%-102% of its datasheet TDP; a GPU draws idle + d x (max - idle) with d its device share of the batch time x
the draw of its math share, the planner's rule in plan/energy.py):

    J per sample  = device watts, busy back to back / published samples per second
    kWh per job   = J per sample x job size / 3.6e6   (inference: 1M requests; training: one ImageNet-1k
                    epoch of 1,281,167 images for ResNet-50, 1M sequences for BERT)

Then an outside check of the GPU rule on LLM serving: ML.ENERGY v3's Zeus (NVML) readings of vLLM
serving Llama-3.1-8B and 70B and Qwen3-8B, 14B and 32B on 1-4 H100s at 8-1024 sequences, and on B200s (a check
device: datasheet TDP proxy, no CCF row; src/rightsize/llm/data/llm_power_references.csv),
against the planner's rule at steady state (every GPU busy; the math share of each request's prefill and
decode steps, StepCosts.prefill_split / decode_split), at 128 and at 2048 prompt tokens since the prompt lengths
are not published; no target. The rule's one free number, MEMORY_BOUND_DRAW, is the median m solved from those
H100 readings at <= 16 sequences (in-sample there; the larger batches and the B200 rows are not).

Device watts only (no host, no PUE; the planner adds both). ``--store FILE`` compares the power that
``rightsize bench`` measured (RAPL package counters, NVML; ``measure/power.py``) with the model's watts for
the same machine (issue target: within 25%; held out, since MEMORY_BOUND_DRAW comes from ML.ENERGY's readings,
not ours); without measurements it prints SKIPPED with the reason.
Exit 0 unless the table is empty or the comparison misses.
"""

from __future__ import annotations

import csv
import functools
import io
import math
import statistics
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from rightsize.catalog import load_catalog
from rightsize.plan.energy import GPU_IDLE_FRACTION, MEMORY_BOUND_DRAW, gpu_watts, vcpu_watts

IMAGENET_EPOCH = 1_281_167
JOB = {"training": {"resnet50": IMAGENET_EPOCH}, "inference": {}}


def _rows() -> list[dict[str, str]]:
    text = (resources.files("rightsize.catalog") / "data" / "reference" / "published.csv").read_text()
    return list(csv.DictReader(io.StringIO(text)))


def device_watts(row: dict[str, str], draw: float = 1.0) -> tuple[float, str]:
    """Modelled watts of the device(s) a published row ran on, busy the whole time; a GPU draws ``draw`` of its
    dynamic range (the planner's rule: device share x the draw of its math share, plan/energy.py)."""
    catalog = load_catalog("")
    table = catalog.power
    assert table is not None  # the shipped catalog always carries it
    if row["device_class"] == "cpu":
        _, hi, _ = vcpu_watts(table, row["device"])
        threads = int(row["threads"] or row["cores"] or 1)
        return threads * hi, f"{threads} vCPU x {hi:g} W"
    gpus = int(row["gpus"] or 1)
    lo, hi, tdp = gpu_watts(table, row["device"], catalog.accelerators)
    watts = gpus * (lo + draw * (hi - lo))
    if tdp is None:
        return watts, f"{gpus} x {lo:g}..{hi:g} W (CCF) at {draw:.0%}"
    return watts, f"{gpus} x {lo:g}..{hi:g} W (TDP proxy, idle {GPU_IDLE_FRACTION:.1%}) at {draw:.0%}"


def gpu_row_draw(ref: Any, works: dict[str, Any], catalog: Any, gp: Any) -> float:
    """The share of its dynamic power range a GPU draws running a published row's batches back to back: the
    device's share of the batch time x the draw of its math share (1.0 without a trace)."""
    from rightsize.estimate.reference import work_key
    from rightsize.estimate.timemodel import gpu_time_split_ms
    from rightsize.plan.energy import gpu_draw

    acc = catalog.accelerators.get(ref.device)
    work = works.get(work_key(ref.model, ref.mode, ref.input))
    if acc is None or work is None:
        return 1.0
    dev, host, comp = gpu_time_split_ms(work, ref.batch_size, acc, ref.precision, gp)
    share = dev / max(dev, host) if dev > 0 else 1.0
    return share * gpu_draw(comp / dev if 0 < dev < math.inf else 0.0)


def samples_per_s(row: dict[str, str]) -> float:
    """Published throughput, or batch / latency for latency rows."""
    if row["metric"] == "throughput_per_s":
        return float(row["value"])
    return int(row["batch_size"]) * 1000.0 / float(row["value"])


def measured_power_available() -> str | None:
    """Why modelled watts cannot be checked here (None: a counter exists)."""
    from rightsize.measure.power import open_power_meter

    meter, why = open_power_meter("cpu")
    if meter is not None:
        return None
    gpu, why_gpu = open_power_meter("cuda")
    return None if gpu is not None else f"{why}; {why_gpu}"


def modelled_watts(
    m: Any, env: Any, catalog: Any, works: dict[str, Any], gpu_params: Any, memory_draw: float | None = None
) -> tuple[float | None, str]:
    """The power model's watts for what a stored measurement ran, by the planner's rule (plan/energy.py:
    idle + u x (full - idle)). CPU (RAPL, the whole package): ``threads`` vCPUs busy, the others idle. GPU (NVML):
    u = the device's busy share of the measured batch time, the time model's device part (the rest is the
    host dispatching eager ops while the GPU waits) over the measured time."""
    from rightsize.catalog import match_cpu_family

    table = catalog.power
    if m.device == "cpu":
        fam = match_cpu_family(catalog.cpus, env)
        if fam is None or fam.name not in table.cpu:
            return None, f"no power row for this CPU ({env.cpu_model})"
        lo, hi, _ = vcpu_watts(table, fam.name)
        busy = min(env.logical_cores, m.threads or env.logical_cores)
        return env.logical_cores * lo + busy * (hi - lo), f"{fam.name}: {busy} of {env.logical_cores} vCPUs busy"
    terms, how = gpu_terms(m, env, catalog, works, gpu_params)
    return (None, how) if terms is None else (gpu_terms_watts(terms, memory_draw), how)


GpuTerms = tuple[float, float, float, float]  # (idle W, full W, device busy share, math share)


def gpu_terms(m: Any, env: Any, catalog: Any, works: dict[str, Any], gpu_params: Any) -> tuple[GpuTerms | None, str]:
    """What the GPU rule needs of a stored GPU measurement, from one pass of the time model, and how it was read
    (None and why when no catalog GPU matches; full use when the model has no trace)."""
    from rightsize.catalog import match_accelerator
    from rightsize.estimate.reference import work_key
    from rightsize.estimate.timemodel import gpu_time_split_ms

    gpu = env.gpus[0] if env.gpus else None
    acc = match_accelerator(gpu.name if gpu else None, catalog.accelerators, gpu.memory_bytes if gpu else None)
    if acc is None:
        return None, f"no catalog GPU for {gpu.name if gpu else 'this machine'}"
    lo, hi, _ = gpu_watts(catalog.power, acc.name, catalog.accelerators)
    work = works.get(work_key(m.model, m.mode, m.input))
    if work is None:
        return (lo, hi, 1.0, 1.0), f"{acc.name} at full use (no trace of {m.model})"
    t_dev, _, t_comp = gpu_time_split_ms(work, m.batch_size, acc, m.precision, gpu_params)
    u, c = min(1.0, t_dev / m.latency_ms.p50), t_comp / t_dev if 0 < t_dev < math.inf else 0.0
    return (lo, hi, u, c), f"{acc.name} {u:.0%} busy, math units {c:.0%} of it"


def gpu_terms_watts(terms: GpuTerms, memory_draw: float | None = None) -> float:
    """idle + u x draw(c) x (full - idle), with the shipped MEMORY_BOUND_DRAW unless ``memory_draw`` is given."""
    from rightsize.plan.energy import gpu_draw

    lo, hi, u, c = terms
    draw = gpu_draw(c) if memory_draw is None else gpu_draw(c, memory_draw)
    return lo + u * draw * (hi - lo)


def measured_vs_modelled(store_path: Path) -> int:
    """Every stored measurement that recorded ``power_w`` against the model; exit 1 when the target misses."""
    from rightsize.estimate.calibration import read_calibration
    from rightsize.estimate.projection import load_projection_model
    from rightsize.estimate.reference import json_input
    from rightsize.estimate.work import trace_works
    from rightsize.measure.power import MIN_POWER_WINDOW_S
    from rightsize.store import Store

    catalog = load_catalog("")
    gpu_params = load_projection_model().gpu
    if store_path.suffix == ".json":  # a calibration run's export (benchmarks/gpu/export.py)
        run = read_calibration(store_path)
        candidates = [(m, run.env) for m in run.measurements]
    else:
        with Store(store_path) as db:
            candidates = [(m, db.env(m.env_id)) for m in db.measurements() if m.env_id is not None]
    # A reading over a window shorter than MIN_POWER_WINDOW_S misreads by a counter step (measure/power.py).
    stored = [(m, env) for m, env in candidates if m.status == "ok" and (m.extra.get("power_w") or 0) > 0
              and m.extra.get("power_window_s", MIN_POWER_WINDOW_S) >= MIN_POWER_WINDOW_S]  # fmt: skip
    works = trace_works({(m.model, m.mode, json_input(m.input)) for m, _ in stored if m.device != "cpu"})
    rows = []
    for m, env in stored:
        watts, how = modelled_watts(m, env, catalog, works, gpu_params)
        if watts:
            rows.append((m, float(m.extra["power_w"]), watts, how))
    if not rows:
        print(f"no stored measurement in {store_path} recorded measured power (rightsize bench on a machine with "
              "RAPL or NVML records it): SKIPPED")  # fmt: skip
        return 0
    print(f"{'model':<13}{'device':<8}{'prec':<6}{'batch':>6}{'measured W':>12}{'modelled W':>12}{'error':>8}  basis")
    errors = []
    for m, measured, modelled, how in rows:
        err = modelled / measured - 1.0
        errors.append(abs(err))
        print(f"{m.model:<13}{m.device:<8}{m.precision:<6}{m.batch_size:>6}{measured:>12.1f}{modelled:>12.1f}"
              f"{err:>+8.0%}  {how} ({m.extra['power_source']})")  # fmt: skip
    errors.sort()
    med, worst = errors[len(errors) // 2], errors[-1]
    ok = worst <= 0.25
    gpu_rows = [(m, env) for m, env in stored if m.device != "cpu"]
    terms = [(m, t) for m, env in gpu_rows if (t := gpu_terms(m, env, catalog, works, gpu_params)[0]) is not None]
    held_out = (f"; held out: MEMORY_BOUND_DRAW = {MEMORY_BOUND_DRAW:g} is the median m of outside readings, never "
                "fitted to these") if terms else ""  # fmt: skip
    print(f"modelled vs measured: n={len(rows)} median |error| {med:.0%}, worst {worst:.0%} (target <= 25%: "
          f"{'PASS' if ok else 'FAIL'}{held_out})")  # fmt: skip
    if not terms:
        return 0 if ok else 1
    lo_m, mid_m, hi_m = outside_memory_draw()
    print(f"MEMORY_BOUND_DRAW from outside readings only (ML.ENERGY decode at <= {OUTSIDE_MAX_BATCH} sequences, "
          f"prompts {LLM_PROMPT_RANGE[0]}-{LLM_PROMPT_RANGE[1]}): {lo_m:.2f}-{hi_m:.2f}, median {mid_m:.2f} "
          f"(shipped {MEMORY_BOUND_DRAW:g}); these readings at its ends:")  # fmt: skip
    for label, draw in (("low end", lo_m), ("high end", hi_m)):
        out = sorted(abs(gpu_terms_watts(t, draw) / float(m.extra["power_w"]) - 1.0) for m, t in terms)
        print(f"  {label} {draw:.2f}: n={len(out)} median |error| {out[len(out) // 2]:.1%}, worst {out[-1]:.1%}")
    held = _held_out_by_model(terms)
    if held:  # for comparison: m fitted to our own readings instead, each model judged by the others' fit
        all_held: list[float] = []
        for model, (m_fit, errs) in held.items():
            errs = sorted(errs)
            all_held += errs
            print(f"  m fitted on our other models' readings instead ({m_fit:.2f}), {model}: median |error| "
                  f"{errs[len(errs) // 2]:.0%}, worst {errs[-1]:.0%}")  # fmt: skip
        all_held.sort()
        print(f"  m fitted on our own readings, held out by model: n={len(all_held)} median |error| "
              f"{all_held[len(all_held) // 2]:.0%}, worst {all_held[-1]:.0%}")  # fmt: skip
    return 0 if ok else 1


OUTSIDE_MAX_BATCH = 16  # decode-bound whatever the prompt lengths: the cleanest memory-bound readings


def outside_memory_draw() -> tuple[float, float, float]:
    """(lowest, median, highest) MEMORY_BOUND_DRAW the ML.ENERGY H100 readings at <= OUTSIDE_MAX_BATCH sequences imply,
    at both ends of LLM_PROMPT_RANGE: each reading's draw d = (W / gpus - idle) / (device share x range), and
    m = (d - c) / (1 - c) with c its math share (planner's rule, solved for m). The shipped value is the median."""
    catalog = _with_checks()
    ms = []
    for r in llm_power_rows():
        if r["device"] != "H100" or float(r["avg_batch_size"]) > OUTSIDE_MAX_BATCH:
            continue
        lo, hi, _ = gpu_watts(catalog.power, r["device"], catalog.accelerators)  # type: ignore[arg-type]
        for n in LLM_PROMPT_RANGE:
            device, compute = llm_shares(r, n)
            d = (float(r["avg_power_watts"]) / int(r["gpus"]) - lo) / (device * (hi - lo))
            ms.append((d - compute) / (1.0 - compute))
    return min(ms), statistics.median(ms), max(ms)


def _held_out_by_model(terms: list[tuple[Any, GpuTerms]]) -> dict[str, tuple[float, list[float]]]:
    """{model: (memory draw fitted on the other models' readings, that model's |errors|)} from (measurement, its
    ``gpu_terms``) pairs: a grid search of MEMORY_BOUND_DRAW (0.20-1.00) for the smallest median error (how the
    shipped value was chosen before it came from outside readings)."""
    models = sorted({m.model for m, _ in terms})
    if len(models) < 2:
        return {}

    def errors(subset: list[tuple[Any, GpuTerms]], draw: float) -> list[float]:
        return [abs(w / float(m.extra["power_w"]) - 1.0) for m, t in subset if (w := gpu_terms_watts(t, draw))]

    held = {}
    grid = [i / 100 for i in range(20, 101)]
    for model in models:
        fit = [r for r in terms if r[0].model != model]
        best = min(grid, key=lambda d: statistics.median(errors(fit, d) or [math.inf]))
        held[model] = (best, errors([r for r in terms if r[0].model == model], best))
    return held


@functools.cache
def _with_checks() -> Any:
    """The shipped catalog plus the check devices (the B200: TDP proxy, no CCF row), loaded once."""
    from rightsize.estimate.reference import with_check_devices

    return with_check_devices(load_catalog(""))


# Prompt lengths the ML.ENERGY rows do not publish: the modelled power is printed at both ends of this range.
LLM_PROMPT_RANGE = (128, 2048)


def llm_power_rows() -> list[dict[str, str]]:
    """The LLM serving power readings (src/rightsize/llm/data/llm_power_references.csv: ML.ENERGY v3, Zeus/NVML)."""
    text = (resources.files("rightsize.llm") / "data" / "llm_power_references.csv").read_text()
    return list(csv.DictReader(io.StringIO(text)))


def llm_shares(row: dict[str, str], prompt_tokens: int) -> tuple[float, float]:
    """(device share, math share) of an LLM replica at steady state by the planner's rule: every GPU busy,
    working the share of each request's time its prefill and its 1/B of O decode steps keep the device working
    (StepCosts.prefill_split / decode_split), the math units working by the split's rule."""
    from rightsize.llm.costs import project_step_costs

    sys.path.insert(0, str(Path(__file__).parent))
    from llm_decode_vs_published import gpu_numbers, shape_of

    catalog = _with_checks()
    acc = catalog.accelerators[row["device"]]
    shape = shape_of(row["model"])
    assert shape is not None
    costs = project_step_costs(shape, gpu_numbers(catalog, acc, row["precision"]), row["precision"],
                               tp=int(row["tensor_parallel"]))  # fmt: skip
    b, o = float(row["avg_batch_size"]), float(row["avg_output_len"])
    p_step, p_dev, p_comp = costs.prefill_split(prompt_tokens)
    d_step, d_dev, d_comp = costs.decode_split(b, b * (prompt_tokens + o / 2))
    step = p_step + o * d_step / b  # one request's share of the replica's time
    device = p_dev + o * d_dev / b
    return device / step, (p_comp + o * d_comp / b) / device


def llm_modelled_watts(row: dict[str, str], prompt_tokens: int) -> tuple[float, float]:
    """(watts of the row's GPUs, math share) by the planner's rule (``llm_shares``; TDP proxy for a GPU
    without a CCF row, as the B200)."""
    from rightsize.plan.energy import gpu_draw

    catalog = _with_checks()
    device, compute = llm_shares(row, prompt_tokens)
    lo, hi, _ = gpu_watts(catalog.power, row["device"], catalog.accelerators)  # type: ignore[arg-type]
    return int(row["gpus"]) * (lo + device * gpu_draw(compute) * (hi - lo)), compute


def llm_power_check() -> None:
    """Modelled vs measured GPU power of LLM serving (ML.ENERGY v3 rows). MEMORY_BOUND_DRAW is the median m solved
    from the H100 rows at <= OUTSIDE_MAX_BATCH sequences, so those rows are in-sample; the larger batches and the
    B200 rows are not. Printed at both ends of LLM_PROMPT_RANGE; no target (the prompt lengths are not published)."""
    rows = llm_power_rows()
    lo_n, hi_n = LLM_PROMPT_RANGE
    print()
    print(f"LLM serving power, measured (ML.ENERGY v3, Zeus) vs modelled at {lo_n} and {hi_n} prompt tokens "
          "(prompt lengths not published):")  # fmt: skip
    print(f"{'row':<38}{'batch':>7}{'measured W':>12}{'model W':>9}{'err':>6}{'math':>9}{'model W':>9}{'err':>6}"
          f"{'math':>9}")  # fmt: skip
    errs: dict[int, list[float]] = {lo_n: [], hi_n: []}
    inside: list[bool] = []
    for r in rows:
        measured = float(r["avg_power_watts"])
        cells = []
        got = []
        for n in LLM_PROMPT_RANGE:
            w, c = llm_modelled_watts(r, n)
            errs[n].append(w / measured - 1.0)
            got.append(w)
            cells.append(f"{w:>9.0f}{w / measured - 1.0:>+6.0%}{c:>9.0%}")
        inside.append(min(got) <= measured <= max(got))
        print(f"{r['id']:<38}{float(r['avg_batch_size']):>7.0f}{measured:>12.0f}" + "".join(cells))
    for device in sorted({r["device"] for r in rows}, key=lambda d: d != "H100"):
        idx = [i for i, r in enumerate(rows) if r["device"] == device]
        for n in LLM_PROMPT_RANGE:
            e = sorted(abs(errs[n][i]) for i in idx)
            signed = statistics.median(errs[n][i] for i in idx)
            print(f"{device} at {n} prompt tokens: n={len(e)} median |error| {statistics.median(e):.0%} (signed "
                  f"{signed:+.0%}), worst {e[-1]:.0%}")  # fmt: skip
        print(f"{device}: measured inside the modelled range: {sum(inside[i] for i in idx)}/{len(idx)}")
    beyond = [i for i, r in enumerate(rows) if r["device"] == "H100" and float(r["avg_batch_size"]) > OUTSIDE_MAX_BATCH]
    for n in LLM_PROMPT_RANGE:  # the H100 rows MEMORY_BOUND_DRAW was not solved from
        e = sorted(abs(errs[n][i]) for i in beyond)
        print(f"H100 beyond {OUTSIDE_MAX_BATCH} sequences (not used for MEMORY_BOUND_DRAW) at {n} prompt tokens: "
              f"n={len(e)} median |error| {statistics.median(e):.0%}, worst {e[-1]:.0%}")  # fmt: skip


def main() -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--store", type=Path, default=None,
                    help="compare the measured power in this store (or a benchmarks/gpu/results/*/measurements.json) "
                         "with the model")  # fmt: skip
    args = ap.parse_args()
    best: dict[tuple[str, str, str], dict[str, str]] = {}
    for r in _rows():
        rate = samples_per_s(r)
        key = (r["model"], r["mode"], r["device"])
        if key not in best or rate > samples_per_s(best[key]):
            best[key] = r
    from rightsize.estimate.projection import load_projection_model
    from rightsize.estimate.reference import load_reference, needed_works
    from rightsize.estimate.work import trace_works

    catalog, gp = load_catalog(""), load_projection_model().gpu
    gpu_ids = {r["id"] for r in best.values() if r["device_class"] == "gpu"}
    refs = {r.id: r for r in load_reference() if r.id in gpu_ids}
    works = trace_works(needed_works(list(refs.values()), []))
    head = f"{'model':<13}{'mode':<10}{'device':<15}{'prec':<6}{'batch':>6}{'samples/s':>11}{'watts':>8}"
    head += f"{'J/sample':>10}{'kWh/job':>10}  job / source"
    print(head)
    print("-" * len(head))
    n = 0
    for (model, mode, device), r in sorted(best.items()):
        draw = gpu_row_draw(refs[r["id"]], works, catalog, gp) if r["id"] in refs else 1.0
        watts, _ = device_watts(r, draw)
        rate = samples_per_s(r)
        joules = watts / rate
        size = JOB[mode].get(model, 1_000_000)
        basis = "ImageNet epoch" if size == IMAGENET_EPOCH else ("1M samples" if mode == "training" else "1M requests")
        kwh = joules * size / 3.6e6
        print(f"{model:<13}{mode:<10}{device:<15}{r['precision']:<6}{r['batch_size']:>6}{rate:>11.1f}{watts:>8.0f}"
              f"{joules:>10.3f}{kwh:>10.3f}  {basis} / {r['source']}")  # fmt: skip
        n += 1
    print()
    print(f"{n} (model, mode, device) rows")
    llm_power_check()
    if args.store is not None:
        return measured_vs_modelled(args.store) if n else 1
    why = measured_power_available()
    print("modelled vs measured power: " + (f"SKIPPED ({why})" if why else
          "a counter exists here: rightsize bench records power_w; rerun with --store FILE"))  # fmt: skip
    return 0 if n else 1


if __name__ == "__main__":
    sys.exit(main())
