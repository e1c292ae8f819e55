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
    loads: str = typer.Option("0.5,0.8", "--loads", help="Load levels as fractions of local capacity."),
    seed: int = typer.Option(0, "--seed", min=0, max=2**32 - 1, help="Seed of the arrivals and the simulation."),
    no_retime: bool = typer.Option(
        False, "--no-retime", help="Skip re-timing the served configuration just before serving."
    ),
    size: str = typer.Option(
        "small", "--size", help="Generative specs: size of the decoder served here (tiny | small | full)."
    ),
    fleet: str = typer.Option(
        "plan",
        "--fleet",
        help="Request-mix specs: serve the plan's choice, or force the size split or one pool (plan | split | single).",
    ),
    no_store: bool = typer.Option(False, "--no-store", help="Do not save the report in the store."),
    store: Path | None = STORE_OPTION,
    catalog: Path | None = CATALOG_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Serve SPEC's planned configuration here and compare measured p50/p95/p99 with the prediction."""
    from rightsize.loadgen.persist import save_result
    from rightsize.spec import load_spec
    from rightsize.store import Store

    check_finite("--duration", duration, 0.0, 86_400.0)
    check_finite("--warmup-s", warmup_s, 0.0, 3_600.0, low_open=False)

    try:
        fractions = tuple(float(x) for x in loads.split(",") if x.strip())
    except ValueError:
        raise SpecError("--loads", f"must be comma-separated fractions like 0.5,0.8, got {loads!r}") from None
    if not fractions or any(not 0 < f < 1 for f in fractions):
        raise SpecError("--loads", f"each load must be in (0, 1), got {loads!r}")
    if duration <= 0:
        raise SpecError("--duration", f"must be > 0, got {duration}")
    if fleet not in ("plan", "split", "single"):
        raise SpecError("--fleet", f"must be plan, split or single, got {fleet!r}")
    workload = load_spec(spec)
    db = Store(store)
    if workload.targets is not None and workload.targets.generative is not None:
        report = _validate_generative(workload, spec, fractions if loads != "0.5,0.8" else None, duration, size, seed,
                                      as_json)  # fmt: skip
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

    from rightsize.llm.decoder import GENERATE_MODELS, lm_config, max_positions
    from rightsize.llm.lengths import sample_lengths
    from rightsize.workflows.validate_generate import LEVELS, render_generative, summarise, validate_generative

    g = workload.targets.generative
    model = workload.model if workload.model in GENERATE_MODELS else "llama-1b"
    if model != workload.model:
        err_console.print(f"note: {workload.model} cannot be served on this machine; the simulator's policy is "
                          f"validated with a stand-in decoder ({model} {size}) at the spec's lengths")  # fmt: skip
    room = max_positions(lm_config(model, size))
    base = spec.resolve().parent

    def lengths(which: Any, cap: int, name: str) -> Any:
        field = f"targets.generative.{name}"
        return lambda n, rng: np.minimum(sample_lengths(which, n, rng, base, field), cap)

    out_cap = min(512, room // 4)
    say = None if as_json else (lambda msg: err_console.print(msg))
    prompts, outputs = (
        lengths(g.prompt_tokens, room - out_cap, "prompt_tokens"),
        lengths(g.output_tokens, out_cap, "output_tokens"),
    )
    report = validate_generative(model, size, prompts=prompts, outputs=outputs, fractions=fractions or LEVELS,
                                 duration_s=duration, seed=seed, progress=say)  # fmt: skip
    report |= {"kind": "validate-generative", "spec": workload.name, "stand_in": model != workload.model,
               "forecast": summarise([report], "forecast"), "served": summarise([report], "served")}  # fmt: skip
    if not as_json:
        typer.echo(render_generative(report))
        f = report["forecast"]
        typer.echo(f"forecast: median |error| {f['median_abs_err_pct']:.1f}%, worst {f['worst_abs_err_pct']:.1f}%, "
                   f"within 20%: {f['within_20pct']}/{f['n']}")  # fmt: skip
    return report


def register(app: typer.Typer) -> None:
    app.command("validate")(validate)
