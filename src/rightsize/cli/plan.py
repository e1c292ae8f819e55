"""``rightsize plan SPEC``: parse, run ``rightsize.workflows.plan.plan_spec``, print the table or JSON."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from rightsize.catalog.query import HOURS_PER_MONTH
from rightsize.cli._common import (
    CATALOG_OPTION,
    JSON_OPTION,
    STORE_OPTION,
    check_writable,
    emit_json,
    err_console,
    load_catalog_option,
    out_console,
)
from rightsize.errors import SpecError
from rightsize.plan.fleet import replicas_on
from rightsize.plan.job_costs import missed_words
from rightsize.plan.online import FLUID_METHOD as FLUID
from rightsize.units import format_hours, format_share, format_usd
from rightsize.workflows.plan import plan_record, plan_spec, write_plan_report

if TYPE_CHECKING:
    from rightsize.plan import Candidate, PlanResult


def _table(result: PlanResult, top: int) -> Any:
    from rich.table import Table

    kind = result.kind
    shown = min(top, len(result.candidates))
    t = Table(title=f"{escape(result.workload)}: top {shown} of {len(result.candidates)}", title_justify="left")
    # online: replicas, and the instances hosting them when a CPU instance runs several ("4 on 1"); else instances
    cols = ["#", "instance", "device", "replicas" if kind == "online" else "n", "prec", "buy"]
    cols += {
        "online": ["batch/wait", "p50 ms", "p95 ms", "p99 ms", "busy", "$/h", "$/1M req"],
        "rules": ["RAM GiB", "$/h"],
    }.get(kind, ["batch", "hours", "$/h", "$ total"])
    if kind == "training":  # speed-up over one worker / workers (plan.training: all-reduce, slowest worker, batch)
        cols.insert(cols.index("hours"), "scale")
    cols += ["ok", "source"]
    for col in cols:
        left = col in ("instance", "device", "prec", "buy", "ok", "source")
        t.add_column(col, justify="left" if left else "right", no_wrap=col == "instance", overflow="fold")
    for i, c in enumerate(result.candidates[:top], 1):
        layout = f" {c.workers_per_instance}x{c.threads_per_worker}t" if c.threads_per_worker else ""
        per = c.gpus // max(1, c.count) if c.gpus else 0  # per instance, as a CPU row's vCPUs are
        dev = f"{per or c.gpus}x {c.device}" if c.device_class == "gpu" else f"{c.vcpus} vCPU{layout}"
        n = f"{c.count}"
        if kind == "online" and c.replicas:
            n = f"{c.replicas}" + (f" on {c.count}" if c.replicas != c.count else "")
        buy = {"on-demand": "od"}.get(c.purchase, c.purchase)
        row = [str(i), escape(f"{c.provider}:{c.instance}"), dev, n, c.precision, buy]
        if kind == "online":
            lat = c.latency
            row.append(f"{c.batching.max_batch}/{c.batching.max_wait_ms:g}" if c.batching else "-")
            if lat is not None:
                est = "~" if lat.method == FLUID else ""  # estimated, not simulated (see the note under the table)
                row += [f"{est}{v:.1f}" for v in (lat.p50, lat.p95, lat.p99)] + [format_share(lat.utilization)]
            else:
                row += ["-"] * 4
            per_m = c.cost_usd_per_1m_requests
            row += [f"{c.cost_usd_per_hour:.3f}", format_usd(per_m, sign=False) if per_m else "-"]
        elif kind == "rules":
            ram = c.memory_capacity_bytes
            row += [f"{ram / 2**30:.0f}" if ram else "-", f"{c.cost_usd_per_hour:.3f}"]
        else:
            row += [str(c.batching.max_batch) if c.batching else "-"]
            if kind == "training":
                row += [f"{c.scaling_efficiency:.0%}" if c.scaling_efficiency is not None else "-"]
            row += [
                f"{c.runtime_hours:.2f}" if c.runtime_hours else "-",
                # two significant digits under $0.10: a 10-item job's $0.0038 read "0.00" on every row
                format_usd(c.cost_usd_per_hour, sign=False),
                format_usd(c.cost_usd_total, sign=False) if c.cost_usd_total is not None else "-",
            ]
        why = escape((c.reasons[0] if c.reasons else "")[:64])
        row += ["[green]yes[/green]" if c.feasible else f"[red]no[/red]: {why}"]
        row += [f"{c.provenance[:4]} {c.price_date}"]
        t.add_row(*row)
    return t


def print_plan(result: PlanResult, top: int) -> None:
    """The ranked candidates, the recommendation and why, warnings and the Pareto frontier."""
    out_console.print(_table(result, top))
    shown = [*result.candidates[:top], *(result.pareto[:6] if len(result.pareto) > 1 else [])]
    if any(c.latency is not None and c.latency.method == FLUID for c in shown):
        out_console.print("[dim]~ estimated by a fluid approximation, not simulated: a candidate that cannot win the "
                          "plan (the planner simulates the cheapest groups and the Pareto frontier)[/dim]")  # fmt: skip
    if result.kind == "rules":  # not by price alone: a cheaper row of another family ranks below (plan.rules)
        from rightsize.plan.rules import RULES_ORDER

        out_console.print(f"[dim]{RULES_ORDER}[/dim]")
    rec = result.recommendation
    out_console.print()
    out_console.print("[bold]Recommendation[/bold]" if rec else "[bold red]No feasible plan[/bold red]")
    for i, line in enumerate(result.why):
        out_console.print(f"  {escape(_with_month(line, result) if i == 0 else line)}")
    if result.why_not:
        out_console.print("[bold]Why not the other device class[/bold]")
        for line in result.why_not:
            out_console.print(f"  {escape(line)}")
    if result.warnings:
        out_console.print("[bold yellow]Check[/bold yellow]")
        for line in result.warnings:
            out_console.print(f"  - {escape(line)}")
    if result.fleet:
        _print_fleet(result.fleet)
    if len(result.pareto) > 1:
        shown = result.pareto[:6]
        # several precisions: each point says its own (an fp16 point at the fp32 recommendation's price read as it);
        # several purchase options too (a spot, a mixed and an on-demand T4 read as one point three times)
        tagged = len({c.precision for c in [*shown, *result.candidates[:1]]}) > 1
        buys = len({c.purchase for c in [*shown, *result.candidates[:1]]}) > 1
        pts = escape(", ".join(_point(c, tagged, buys) for c in shown))
        more = len(result.pareto) - len(shown)
        rest = f" (+{more} more, the fastest: `--json` lists them)" if more > 0 else ""
        out_console.print(
            f"[bold]Pareto frontier[/bold] (cost vs {'latency' if result.kind == 'online' else 'time'}): {pts}{rest}"
        )
    n = len(result.candidates)
    out_console.print(f"[dim]planned {n} candidates in {result.elapsed_s:.2f} s; prices {_price_dates(result)}[/dim]")


def _price_dates(result: PlanResult) -> str:
    """The dates of the prices the plan used: the recommendation's, as its price line gives it, then the ranked
    candidates' span when it differs. ``result.price_date`` (--json) is the candidates' newest: a user file's row
    dated by its modification day had put "prices 2026-11-29" under a pick whose line said "price 2026-10"."""
    dates = sorted({c.price_date for c in result.candidates if c.price_date})
    span = f"{dates[0]} to {dates[-1]}" if len(dates) > 1 else dates[0] if dates else result.price_date
    rec = result.recommendation
    if rec is None or not rec.price_date:
        return span
    return (
        rec.price_date
        if dates in ([], [rec.price_date])
        else f"{rec.price_date} (the recommendation's; the candidates' {span})"
    )


def _with_month(line: str, result: PlanResult) -> str:
    """The recommendation line of an always-on online plan with its month beside its hour ("$0.10/h (~$74.93/month),
    ..."): text only, `--json` keeps the hourly price. Not a plan with an idle policy: its hourly price is a day's
    average, a month of it is not what the bill says."""
    rec = result.recommendation
    if result.kind != "online" or rec is None or rec.idle_policy:
        return line
    hourly = f": {format_usd(rec.cost_usd_per_hour)}/h"
    head, found, tail = line.partition(hourly)
    if not found:
        return line
    return f"{head}{hourly} (~{format_usd(rec.cost_usd_per_hour * HOURS_PER_MONTH)}/month){tail}"


def _print_fleet(fleet: dict[str, Any]) -> None:
    """The request mix's plan: one pool for every request vs pools split by request size (plan.fleet)."""
    mix = ", ".join(f"{m['share']:.0%} x {m['samples']}" for m in fleet["mix"])
    out_console.print(f"[bold]Request mix[/bold] ({mix} samples): [bold]{escape(fleet['choice'])}[/bold]")

    def pool(label: str, c: dict[str, Any]) -> None:
        lat = c.get("latency_ms") or {}
        b = c.get("batching") or {}
        out_console.print(
            f"  {label}: {escape(replicas_on(c['replicas'], c.get('count'), c['instance']))} ({c['device']}, "
            f"{c['precision']}), batch "
            f"{b.get('max_batch', '-')}, p95 {lat.get('p95', float('nan')):.1f} ms, ${c['cost_usd_per_hour']:.2f}/h"
        )

    if fleet.get("single"):
        pool("one pool    ", fleet["single"])
    split = fleet.get("split")
    if split:
        c = split["crossover_samples"]
        pool(f"< {c} samples ", split["small"])
        pool(f">= {c} samples", split["large"])
    clouds = [n for n in fleet.get("notes", []) if "two clouds" in n][:1]  # a mixed-cloud split says so
    for line in dict.fromkeys([*clouds, *fleet.get("notes", [])[-1:]]):
        out_console.print(f"  {escape(line)}")


def _point(c: Candidate, precision: bool = False, purchase: bool = False) -> str:
    """A frontier point in words; ``precision`` / ``purchase``: name the point's precision / purchase option after
    its instances."""
    tags = (f" {c.precision}" if precision else "") + (f" {c.purchase}" if purchase else "")
    if c.latency is not None:
        ms = c.latency.p_target_ms or c.latency.p95
        est = "~" if c.latency.method == FLUID else ""  # a fluid estimate, as the table marks it
        # replicas on instances as the fleet says it: "c7a.large x1, 2 replicas" read as a contradiction; under a
        # millisecond two significant digits ("0 ms" was a 0.41 ms p95)
        where = replicas_on(c.replicas, c.count, c.instance) if c.replicas else f"{c.count} x {c.instance}"
        shown = f"{ms:.0f}" if ms >= 1 else f"{ms:.2g}"
        return f"{where}{tags} ({format_usd(c.cost_usd_per_hour)}/h, {est}{shown} ms)"
    name = f"{c.instance} x{c.count}{tags}"
    # a job's frontier shows what a later deadline or a bigger budget would buy, and at which edge of the band it
    # misses ("$2.47, misses the budget" against $3.00 read as a contradiction)
    missed = missed_words(c)
    late = f", misses {' and '.join(missed)}" if missed else ""
    return f"{name} ({format_usd(c.cost_usd_total or 0.0)}, {format_hours(c.runtime_hours or 0)}{late})"


def plan_cmd(
    spec: Path = typer.Argument(..., help="Workload spec with targets (YAML), e.g. examples/sentiment-api.yaml."),
    json_out: bool = JSON_OPTION,
    store: Path | None = STORE_OPTION,
    catalog: list[Path] | None = CATALOG_OPTION,
    report: Path | None = typer.Option(None, "--report", help="Also write a report: PATH.html or PATH.md."),
    top: int = typer.Option(10, "--top", min=1, help="Candidates to show (and to put in --json)."),
    seed: int = typer.Option(0, "--seed", min=0, max=2**32 - 1, help="Random seed of the simulations."),
) -> None:
    """Recommend the cheapest CPU or GPU setup that meets the spec's SLO or deadline."""
    from rightsize.spec import load_spec
    from rightsize.store import Store

    workload = load_spec(spec)
    if workload.targets is None:
        raise SpecError(
            "targets", f"{spec.name} has no targets; add online, batch, training or generative (see examples/)"
        )
    if report is not None:
        from rightsize.report import check_report_path

        check_report_path(report, "--report")  # before the work, for every kind of plan
        check_writable(report, "--report", store, only_ours=True)
    db = Store(store)
    if workload.targets.generative is not None:
        _plan_generative(workload, spec, db, load_catalog_option(catalog), json_out, top, seed, report)
        return
    result, context = plan_spec(workload, db, load_catalog_option(catalog), progress=not json_out, seed=seed)
    # stored whole: every candidate and the report's evidence, so `report RUN` shows what --report shows
    record = {"name": workload.name, **plan_record(result, context)}
    if report is not None:
        write_plan_report(result, report, context, record)  # the stored evidence: sweeps simulated once
    # shown before it is stored: a store another process keeps locked fails the save, not the answer
    if json_out:
        emit_json(result.to_dict(top=top))
    else:
        print_plan(result, top)
    stored = db.save_artifact(None, "plan", record)
    if not json_out:
        err_console.print(f"stored as plan {stored}: `rightsize report {stored}` writes its report", highlight=False)
    if report is not None:
        err_console.print(f"report: {report}")


def _plan_generative(workload: Any, spec: Path, db: Any, catalog: Any, json_out: bool, top: int, seed: int,
                     report: Path | None) -> None:  # fmt: skip
    """targets.generative: instance, tensor-parallel degree and replicas from the continuous-batching simulator."""
    from rich.table import Table

    from rightsize.plan.explain import price_age
    from rightsize.workflows.generate import generative_purchase, plan_generative_spec

    plan = plan_generative_spec(workload, catalog, spec.resolve().parent, seed=seed)
    if report is not None:
        from rightsize.report.generative import write_generative_report

        write_generative_report(plan, workload.targets.generative, workload.name, report)
        err_console.print(f"report: {report}")
    g = workload.targets.generative
    purchase = generative_purchase(workload.targets)
    # what the numbers are: the candidates' ttft_ms / tpot_ms are these percentiles, usd_per_hour this purchase
    head = {"kind": "generative-plan", "name": workload.name, "model": workload.model,
            "target": g.model_dump(mode="json"), "ttft_percentile": g.ttft.percentile,
            "tpot_percentile": g.tpot.percentile, "purchase": purchase}  # fmt: skip
    out = head | plan.to_dict()
    out["candidates"] = out["candidates"][:top]
    out["why_no_plan"] = plan.why_none(g.budget_usd_per_hour)
    # its own kind: the online/batch/training report and dashboard read "plan" artifacts as PlanResult records;
    # with the plan's state, so `rightsize report RUN` writes what --report writes
    if json_out:  # shown before it is stored: a store another process keeps locked fails the save, not the answer
        emit_json(out)
        db.save_artifact(None, "generative-plan", out | {"report_state": plan.state()})
        return
    table = Table(title=f"{escape(workload.name)}: {g.rate_per_s:g} req/s, TTFT p{g.ttft.percentile:g} <= "
                  f"{g.ttft.bound_ms:g} ms, TPOT p{g.tpot.percentile:g} <= {g.tpot.bound_ms:g} ms")  # fmt: skip
    for col in ("instance", "device", "tp", "replicas", "instances", "$/h", f"TTFT p{g.ttft.percentile:g}",
                f"TPOT p{g.tpot.percentile:g}", "$/1M out tok", "kWh/1M"):  # fmt: skip
        table.add_column(col, justify="left" if col in ("instance", "device") else "right")
    for c in plan.candidates[:top]:
        kwh = f"{c.kwh_per_m_output_tokens:.3f}" if c.kwh_per_m_output_tokens is not None else "-"
        cost = format_usd(c.usd_per_hour, sign=False) + (" (over budget)" if c.over_budget else "")
        per_m = format_usd(c.usd_per_m_output_tokens, sign=False)
        table.add_row(escape(c.instance), c.device, c.tp_words(), str(c.replicas), str(c.instances), cost,
                      f"{c.ttft_ms:.0f} ms", plan.tpot_words(c.tpot_ms, cell=True), per_m, kwh)  # fmt: skip
    if plan.candidates:  # none serves it: the reasons below, not a header over no rows
        out_console.print(table)
    rec = plan.recommendation
    if rec is None:
        out_console.print(f"[bold red]{escape(plan.why_none(g.budget_usd_per_hour) or '')}[/bold red]", highlight=False)
    else:
        split = f"tensor parallel {rec.tp}, " if rec.device_class == "gpu" else ""  # a CPU replica: all its cores
        per_m = format_usd(rec.usd_per_m_output_tokens)
        out_console.print(f"[bold]recommendation:[/bold] {rec.instances} x {escape(rec.instance)} ({rec.device}, "
                          f"{split}{rec.replicas} replica(s)) at {format_usd(rec.usd_per_hour)}/h, "
                          f"{per_m} per 1M output tokens", highlight=False)  # fmt: skip
        if rec.price_date:
            out_console.print(f"[dim]prices {rec.price_date}{price_age(rec.price_date)} "
                              f"({escape(rec.price_source)})[/dim]", highlight=False)  # fmt: skip
        if rec.watts is not None and rec.kwh_per_m_output_tokens is not None:
            gpu = f", {rec.gpu_work()}" if rec.gpu_work() else ""
            out_console.print(f"energy: the fleet draws {rec.watts:.0f} W, its replicas {rec.busy:.0%} busy{gpu}: "
                              f"{rec.kwh_per_m_output_tokens:.3f} kWh, {rec.co2e_kg_per_m_output_tokens or 0:.3f} kg "
                              "CO2e per 1M output tokens", highlight=False)  # fmt: skip
    for cls in ("cpu", "gpu"):
        best = plan.best(cls)
        if best is not None and (rec is None or best.device_class != rec.device_class):
            rate = format_usd(best.usd_per_hour)
            ratio = f" ({best.usd_per_hour / rec.usd_per_hour:.1f}x the cost)" if rec and rec.usd_per_hour > 0 else ""
            line = (f"best {cls.upper()} plan: {best.instances} x {best.instance} at {rate}/h{ratio}, "
                    f"{format_usd(best.usd_per_m_output_tokens)} per 1M output tokens, TTFT {best.ttft_ms:.0f} ms, "
                    f"TPOT {plan.tpot_words(best.tpot_ms)}")  # fmt: skip
            out_console.print(escape(line), highlight=False)
    for note in plan.notes:
        out_console.print(f"note: {escape(note)}", highlight=False)
    if plan.infeasible:
        shown = "; ".join(f"{i}: {r}" for i, r in plan.infeasible_by_interest()[:3])
        n = len(plan.infeasible)
        out_console.print(f"{n} instance option{'s' if n != 1 else ''} cannot serve it, e.g. {escape(shown)}",
                          highlight=False)  # fmt: skip
    stored = db.save_artifact(None, "generative-plan", out | {"report_state": plan.state()})
    err_console.print(f"stored as plan {stored}: `rightsize report {stored}` writes its report", highlight=False)


def register(app: typer.Typer) -> None:
    app.command("plan")(plan_cmd)
