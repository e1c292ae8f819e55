"""``rightsize validate SPEC``: parse, run ``rightsize.workflows.validate.validate_spec``, print or store.

rightsize validate examples/sentiment-api.yaml [--duration 10] [--loads 0.5,0.8]
rightsize validate examples/mixed-sizes-api.yaml [--fleet plan|split|single]   (a request_mix: validate_mix)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from rightsize.cli._common import CATALOG_OPTION, JSON_OPTION, STORE_OPTION, emit_json, err_console, load_catalog_option
from rightsize.errors import SpecError
from rightsize.inputfile import check_finite
from rightsize.workflows.validate import render_report, validate_spec


def validate(
    spec: Path = typer.Argument(..., help="Workload spec (YAML) with targets.online or targets.generative."),
    duration: float = typer.Option(
        10.0,
        "--duration",
        help="Seconds of load per level after warm-up (slow levels run longer, up to 6x; generative: to 40 requests).",
    ),
    warmup_s: float = typer.Option(1.0, "--warmup-s", min=0.0, help="Seconds sent but not recorded per level."),
    loads: str | None = typer.Option(
        None, "--loads", help="Load levels as fractions of local capacity [default: 0.5,0.8; generative: 0.3,0.6,0.85]."
    ),
    seed: int = typer.Option(0, "--seed", min=0, max=2**32 - 1, help="Seed of the arrivals and the simulation."),
    no_retime: bool = typer.Option(
        False, "--no-retime", help="Skip re-timing the served configuration just before serving."
    ),
    size: str | None = typer.Option(
        None, "--size", help="Generative specs: size of the decoder served here (tiny | small | full; default small)."
    ),
    fleet: str = typer.Option(
        "plan",
        "--fleet",
        help="Request-mix specs: serve the plan's choice, or force the size split or one pool (plan | split | single).",
    ),
    no_store: bool = typer.Option(False, "--no-store", help="Do not save the report in the store."),
    store: Path | None = STORE_OPTION,
    catalog: list[Path] | None = CATALOG_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Serve SPEC's planned configuration here and compare measured p50/p95/p99 with the prediction."""
    from rightsize.loadgen.persist import save_result
    from rightsize.spec import load_spec
    from rightsize.store import Store

    check_finite("--duration", duration, 0.0, 86_400.0)
    check_finite("--warmup-s", warmup_s, 0.0, 3_600.0, low_open=False)

    if loads is not None and not loads.strip(" ,"):  # '' had meant the default levels
        raise SpecError("--loads", f"is empty; give comma-separated fractions like 0.5,0.8, got {loads!r}")
    try:
        fractions = tuple(float(x) for x in (loads or "0.5,0.8").split(",") if x.strip())
    except ValueError:
        raise SpecError("--loads", f"must be comma-separated fractions like 0.5,0.8, got {loads!r}") from None
    if not fractions or any(not 0 < f < 1 for f in fractions):
        raise SpecError("--loads", f"each load must be in (0, 1), got {loads!r}")
    if duration <= 0:
        raise SpecError("--duration", f"must be > 0, got {duration}")
    if fleet not in ("plan", "split", "single"):
        raise SpecError("--fleet", f"must be plan, split or single, got {fleet!r}")
    workload = load_spec(spec)
    if size is not None and (workload.targets is None or workload.targets.generative is None):
        raise SpecError("--size", "sizes the decoder a generative spec serves; this spec has no targets.generative: "
                        "drop it")  # fmt: skip
    db = Store(store)
    if workload.targets is not None and workload.targets.generative is not None:
        report = _validate_generative(workload, spec, fractions if loads is not None else None, duration,
                                      size or "small", seed, as_json)  # fmt: skip
        if not no_store:
            report["artifact_id"] = save_result(report, db.path, kind="validate")
        if as_json:
            emit_json(report)
        return
    online = workload.targets.online if workload.targets is not None else None
    if online is not None and online.request_mix is not None:
        from rightsize.workflows.validate_mix import render_mix_report, validate_mix

        report = validate_mix(
            workload, db, load_catalog_option(catalog), fleet=fleet, fractions=fractions, duration_s=duration,
            warmup_s=warmup_s, progress=not as_json, seed=seed,
        )  # fmt: skip
        _store_and_print(report, db, no_store, as_json, render_mix_report)
        if not any(c["measured_ms"] for p in report["points"] for c in p["classes"]):
            raise typer.Exit(1)
        return
    report = validate_spec(
        workload, db, load_catalog_option(catalog), fractions=fractions, duration_s=duration, warmup_s=warmup_s,
        progress=not as_json, seed=seed, retime=not no_retime,
    )  # fmt: skip
    _store_and_print(report, db, no_store, as_json, render_report)
    if not any(p["measured_ms"] for p in report["points"]):
        raise typer.Exit(1)


def _store_and_print(
    report: dict[str, Any], db: Any, no_store: bool, as_json: bool, render: Callable[[dict[str, Any]], str]
) -> None:
    """Save the report as a ``validate`` artifact (unless ``--no-store``) and print it (text or JSON)."""
    from rightsize.loadgen.persist import save_result

    if not no_store:
        report["artifact_id"] = save_result(report, db.path, kind="validate")
    if as_json:
        emit_json(report)
        return
    typer.echo(render(report))
    if report.get("artifact_id"):
        err_console.print(f"stored as artifact {report['artifact_id']}")


def _validate_generative(workload: Any, spec: Path, fractions: tuple[float, ...] | None, duration: float, size: str,
                         seed: int, as_json: bool) -> dict[str, Any]:  # fmt: skip
    """targets.generative: the continuous-batching simulator against the real generation server here."""
    import numpy as np

    from rightsize.cpus import usable_cores
    from rightsize.llm.decoder import GENERATE_MODELS, lm_config, max_positions
    from rightsize.llm.lengths import sample_lengths
    from rightsize.measure.conditions import loadavg_1m
    from rightsize.workflows.validate_generate import LEVELS, render_generative, summarise, validate_generative

    g = workload.targets.generative
    model = workload.model if workload.model in GENERATE_MODELS else "llama-1b"
    if model != workload.model:
        err_console.print(f"note: {workload.model} cannot be served on this machine; the simulator's policy is "
                          f"validated with a stand-in decoder ({model} {size}) at the spec's lengths")  # fmt: skip
    elif size != "full":  # said only in --json ("stand_in": true) before
        err_console.print(f"note: serving a {size} {model} here, a smaller decoder than the spec's: the "
                          "simulator's policy is validated at the spec's lengths (`--size full` serves "
                          f"{model} itself)")  # fmt: skip
    room = max_positions(lm_config(model, size))
    base = spec.resolve().parent
    capped: dict[str, int] = {}  # the lengths this decoder's context cut: name -> the longest asked for

    def lengths(which: Any, cap: int, name: str) -> Any:
        field = f"targets.generative.{name}"

        def draw(n: int, rng: np.random.Generator) -> np.ndarray:
            got = sample_lengths(which, n, rng, base, field)
            if got.size and int(got.max()) > cap:
                capped[name] = max(capped.get(name, 0), int(got.max()))
            return np.minimum(got, cap)

        return draw

    out_cap = min(512, room // 4)
    caps = {"prompt_tokens": room - out_cap, "output_tokens": out_cap}
    say = None if as_json else (lambda msg: err_console.print(msg))
    prompts, outputs = (lengths(getattr(g, k), caps[k], k) for k in ("prompt_tokens", "output_tokens"))
    load_before = loadavg_1m()
    report = validate_generative(model, size, prompts=prompts, outputs=outputs, fractions=fractions or LEVELS,
                                 duration_s=duration, seed=seed, progress=say)  # fmt: skip
    notes = [f"{k}: up to {v} asked for; the {model} {size} served here holds {room} positions, so each was cut to "
             f"{caps[k]} (the simulator is checked at the lengths sent)" for k, v in capped.items()]  # fmt: skip
    if g.weight_precision in ("int8", "int4"):
        notes.append(f"weight_precision {g.weight_precision} is not served here: the server runs fp32 weights; "
                     "this checks the simulator's scheduling, not that precision's speed (the plan projects "
                     "it)")  # fmt: skip
    cores = usable_cores()
    if load_before is not None and load_before >= BUSY_LOAD * cores:
        notes.append(f"the machine was busy before the run (1-minute load average {load_before:.1f} on {cores} "
                     "core(s)): other work shared the server's cores, so measured times run slow against the "
                     "simulator; re-run on a quiet machine before trusting the errors")  # fmt: skip
    report |= {"kind": "validate-generative", "spec": workload.name, "served_model": f"{model} {size}",
               "stand_in": model != workload.model or size != "full", "notes": notes,
               "forecast": summarise([report], "forecast"), "served": summarise([report], "served")}  # fmt: skip
    if not as_json:
        typer.echo(render_generative(report))
        f = report["forecast"]
        left = f" ({f['invalid_levels']} level(s) not valid, left out)" if f["invalid_levels"] else ""
        typer.echo(f"forecast: median |error| {f['median_abs_err_pct']:.1f}%, worst {f['worst_abs_err_pct']:.1f}%, "
                   f"within 20%: {f['within_20pct']}/{f['n']}{left}")  # fmt: skip
        for note in notes:
            typer.echo(f"note: {note}")
    return report


# A 1-minute load average before a generative validation at or above this share of the cores: others' work
BUSY_LOAD = 0.5


def register(app: typer.Typer) -> None:
    app.command("validate")(validate)
