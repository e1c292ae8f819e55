"""``rightsize bench SPEC``: measure a workload's sweep on this machine and store the results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from rightsize.cli._common import JSON_OPTION, STORE_OPTION, emit_json, err_console, out_console
from rightsize.errors import print_stop
from rightsize.measure.quality import SLOW_VS_BEST, is_contended, measurement_quality
from rightsize.profile import Measurement
from rightsize.units import format_bytes


def record(m: Measurement) -> dict[str, Any]:
    """One `bench --json` record: every Measurement field, latency as p50/p95/p99/mean/std/n."""
    d = m.to_dict()
    lat = m.latency_ms
    d["latency_ms"] = (
        {"p50": lat.p50, "p95": lat.p95, "p99": lat.p99, "mean": lat.mean, "std": lat.std, "n": lat.n} if lat else None
    )
    return d


def sweep_table(measurements: list[Measurement], title: str) -> Any:
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=escape(title), title_justify="left")
    # Ray sweeps tag each result with the instance type its node stands for.
    instances = [str(m.extra.get("instance_type", "")) for m in measurements]
    # `results --model` lists every run's measurements: several models or input sizes get a column each
    models = [m.model for m in measurements] if len({m.model for m in measurements}) > 1 else []
    inputs = [" ".join(f"{k} {v}" for k, v in sorted(m.input.items())) for m in measurements]
    inputs = inputs if len(set(inputs)) > 1 else []
    cols = ["device", "prec", "batch", "thr", "status", "p50 ms", "p95 ms", "p99 ms", "samples/s", "peak mem"]
    cols += ["GFLOP/sample", "quality"]
    cols[:0] = ["instance"] * bool(any(instances)) + ["model"] * bool(models) + ["input"] * bool(inputs)
    left = ("instance", "model", "input", "device", "prec", "status")
    for col in cols:
        t.add_column(col, justify="left" if col in left else "right")
    for i, (m, inst) in enumerate(zip(measurements, instances, strict=True)):
        lat = m.latency_ms
        t.add_row(
            *([escape(inst)] if any(instances) else []), *map(escape, models[i : i + 1]), *(inputs[i : i + 1]),
            m.device, m.precision, str(m.batch_size), str(m.threads or "all"),
            m.status if m.status == "ok" else f"[red]failed[/red]: {escape(m.reason or '')}",
            f"{lat.p50:.2f}" if lat else "-", f"{lat.p95:.2f}" if lat else "-", f"{lat.p99:.2f}" if lat else "-",
            f"{m.throughput_per_s:.1f}" if m.throughput_per_s else "-",
            format_bytes(m.peak_memory_bytes), f"{m.flops_per_sample / 1e9:.3f}" if m.flops_per_sample else "-",
            _quality_cell(m),
        )  # fmt: skip
    return t


def _quality_cell(m: Measurement) -> str:
    """ok | contended 42% | contended 3%, 0.21x best GFLOP/s | not converged | both, with ``(3 tries)``
    when it was measured again: what the timing conditions say about this row."""
    if m.status != "ok":
        return "-"
    cells = []
    if is_contended(m):
        cell = f"contended {float(m.extra.get('contention') or 0):.0%}"
        ratio = m.extra.get("gflops_vs_best")
        if ratio is not None and float(ratio) < SLOW_VS_BEST:
            cell += f", {float(ratio):.2f}x best GFLOP/s"
        cells.append(f"[yellow]{cell}[/yellow]")
    if m.extra.get("ci_converged") is False:
        cells.append("not converged")
    tries = m.extra.get("attempts")
    return (", ".join(cells) or "ok") + (f" ({tries} tries)" if isinstance(tries, int) and tries > 1 else "")


def ray_address(text: str) -> str:
    """``--ray`` checked before anything connects: 'auto', HOST:PORT or ray://HOST:PORT ([::1]:PORT for IPv6). Ray
    itself refuses other forms with a traceback (``ValueError: Invalid address format``)."""
    from rightsize.errors import SpecError

    if text == "auto":
        return text
    rest = text[len("ray://") :] if text.startswith("ray://") else text
    if rest.startswith("["):  # [v6]:port
        host, _, port = rest[1:].partition("]")
        port = port[1:] if port.startswith(":") else ""
    else:
        host, _, port = rest.rpartition(":")
    bad = set("/[] \t") | (set() if rest.startswith("[") else {":"})  # a colon only inside [v6]
    if not host or any(c in bad for c in host) or not (port.isascii() and port.isdigit() and 0 < int(port) < 65536):
        raise SpecError("--ray", f"must be 'auto' or a cluster address HOST:PORT, e.g. 127.0.0.1:6379 or "
                        f"ray://HOST:10001, got {text!r}")  # fmt: skip
    return text


def bench(
    spec: Path = typer.Argument(..., help="Workload spec (YAML), e.g. examples/quick.yaml."),
    json_out: bool = JSON_OPTION,
    fresh: bool = typer.Option(False, "--fresh", help="Measure again even when the store has results."),
    memory_limit: str | None = typer.Option(
        None, "--memory-limit", help="Per-config memory cap, e.g. 4GiB (RLIMIT_AS)."
    ),
    epochs: int | None = typer.Option(
        None, "--epochs", min=1, max=10_000, help="Training: run N short epochs on synthetic data."
    ),
    store: Path | None = STORE_OPTION,
    ray: str | None = typer.Option(None, "--ray", help="Run on a Ray cluster: 'auto' or an address."),
) -> None:
    """Measure latency, throughput, memory and FLOPs over the spec's sweep."""
    from rightsize.errors import SpecError
    from rightsize.models import workload_model
    from rightsize.plan.planner import check_mode
    from rightsize.spec import load_spec
    from rightsize.store import Store
    from rightsize.units import parse_bytes

    workload = load_spec(spec)
    _check_input(workload_model(workload), workload)  # a bad model or input fails before any progress output
    check_mode(workload)  # a mode the spec's targets cannot plan from: measured for nothing
    if epochs is not None and workload.mode != "training":  # it was ignored, and forced a re-measurement
        raise SpecError("--epochs", f"applies to training only; the spec's mode is {workload.mode}: drop --epochs "
                        "or set mode: training")  # fmt: skip
    if ray is not None:  # --ray '' had run locally, without a word
        ray = ray_address(ray)
    if memory_limit is not None and not memory_limit.strip():  # "$LIMIT" unset had run with no cap, silently
        raise SpecError("--memory-limit", "is empty; give a size such as 4GiB, or leave the option out")
    limit = parse_bytes(memory_limit, "--memory-limit") if memory_limit else None
    if limit is not None and limit < 2**30:  # 1 byte had run every config into a stored out-of-memory failure
        given = str(memory_limit).strip()
        raise SpecError("--memory-limit", f"{given} is below 1GiB, where a measuring process cannot load PyTorch "
                        "(the cap is on address space, RLIMIT_AS); give 1GiB or more")  # fmt: skip
    db = Store(store)
    if ray:
        from rightsize.cluster.bench import run_sweep_on_ray

        result = run_sweep_on_ray(workload, db, address=ray, fresh=fresh, memory_limit_bytes=limit, epochs=epochs)
    else:
        from rightsize.measure.progress import config_count, sweep_progress
        from rightsize.measure.sweep import run_sweep

        with sweep_progress(config_count(workload), name=workload.model) as cb:
            result = run_sweep(workload, db, fresh=fresh, memory_limit_bytes=limit, epochs=epochs, on_progress=cb)
            if result.interrupted:
                cb.stop()
    for note in result.notes:
        err_console.print(f"note: {note}")
    quality = measurement_quality(result.measurements)
    if quality.problems:
        from rich.markup import escape

        err_console.print(f"[yellow]measurement quality:[/yellow] {escape(quality.summary)}. "
                          f"{escape(quality.likely_effect)}", markup=True)  # fmt: skip
    if result.reused:  # the bar counted them; under --fresh these are busy re-readings that kept the stored one
        err_console.print(f"the reused results are in {db.path}" + ("" if fresh else "; --fresh measures them again"))
    if not result.measurements and not result.interrupted:  # every config skipped: say so, not an empty table
        if json_out:
            emit_json([])
        devices, precisions = ", ".join(workload.devices), ", ".join(workload.precisions)
        err_console.print(
            f"error: nothing measured: the spec's devices ({devices}) and precisions ({precisions}) "
            "leave no config this machine can run (see the notes above). To fix: a precision the device runs "
            "(cpu: fp32, bf16, int8), a device it has (devices: [cpu]), or run the spec where those devices are"
        )
        raise typer.Exit(2)  # what this machine cannot run: exit 2, as plan says it for the same spec (was 1)
    if json_out:
        emit_json([record(m) for m in result.measurements])
    elif result.measurements or not result.interrupted:  # interrupted with none: no empty table, the line below says it
        title = f"{workload.model} {workload.mode} on {result.env.machine_label}"
        out_console.print(sweep_table(result.measurements, title))
        _print_epochs(result.measurements)
        _print_power(result.measurements)
        _print_int8(result.measurements)
    if result.interrupted:
        new = len(result.measurements) - result.reused
        print_stop(f"interrupted: {new} finished config(s) are stored" if new else
                   "interrupted before a config finished: nothing new was stored")  # fmt: skip
        raise typer.Exit(130)
    if result.measurements and all(m.status == "failed" for m in result.measurements):
        raise typer.Exit(1)


def _check_input(entry: Any, workload: Any) -> None:
    """Run one sample of a user's model file (TorchScript, torch.export) through `memory`'s trace (fake tensors, else
    real ones on this CPU): an input its graph cannot take is the one line `memory` and `serve` say, exit 2, not the
    same failure on every row. (An ONNX graph's declared shape is checked when the model is resolved.)"""
    from rightsize.errors import RightsizeError

    # the zoo and Hugging Face configs size their own input; a factory is the user's own code, run in each config's
    # child: called here too it ran twice (a slow factory loaded twice, one that never returns waited twice), so its
    # rows say an input it cannot take, and `memory`/`serve` refuse it up front
    if getattr(entry, "fmt", "hf") in ("hf", "factory"):
        return
    from rightsize.estimate.memory_trace import trace_memory

    try:
        batch = getattr(entry, "fixed_batch", None) or 1
        trace_memory(entry, mode="infer", batch_size=batch, seq_len=workload.input.seq_len,
                     image_size=workload.input.image_size, tiny=workload.tiny)  # fmt: skip
    except RightsizeError:
        raise
    except Exception:  # anything else is the model's own failure: each row says it, as before
        return


def _print_power(measurements: list[Measurement]) -> None:
    """Measured watts per config where RAPL / NVML could be read; else why not, once."""
    ok = [m for m in measurements if m.status == "ok"]
    measured = [m for m in ok if m.extra.get("power_w") is not None]
    for m in measured:
        window = f"{m.extra['power_window_s']:.1f} s of runs" if m.extra.get("power_window_s") else "the timed runs"
        out_console.print(
            f"measured power {m.precision} b{m.batch_size}: {m.extra['power_w']:.1f} W over {window} "
            f"({m.extra['power_source']}; the whole package or device, other load included), "
            f"{m.extra['energy_j_per_sample']:.3g} J per sample"
        )
    why = next((m.extra["power_unavailable"] for m in ok if m.extra.get("power_unavailable")), None)
    if not measured and why:
        err_console.print(f"note: power not measured: {why}; plans use modelled watts")


INT8_SCHEMES = {
    "static": "static quantization: convolutions and Linear layers int8, calibrated on one synthetic batch",
    "dynamic": "dynamic quantization: Linear layers int8, the rest fp32",
}


def _print_int8(measurements: list[Measurement]) -> None:
    """Which int8 ran: a conv net FX cannot trace gets dynamic quantization, which barely changes its speed."""
    schemes = sorted({str(m.extra["int8_scheme"]) for m in measurements if m.extra.get("int8_scheme")})
    for scheme in schemes:
        out_console.print(f"int8 here = {INT8_SCHEMES.get(scheme, scheme)}")


def _print_epochs(measurements: list[Measurement]) -> None:
    for m in measurements:
        ep = m.extra.get("epoch_time_s") if m.status == "ok" else None
        if ep:
            losses = ", ".join(f"{v:.4f}" for v in m.extra["epoch_loss"])
            out_console.print(
                f"{m.precision} b{m.batch_size}: {len(ep)} epochs of {m.extra['samples_per_epoch']} samples, "
                f"{sum(ep) / len(ep):.2f} s/epoch, loss per epoch: {losses}"
            )


def register(app: typer.Typer) -> None:
    app.command("bench")(bench)
