"""``rightsize memory MODEL``: peak memory of training or inference, the GPU tier that fits, advice.

rightsize memory llama-7b --mode infer --precision fp16 --batch 1 --seq 2048
rightsize memory resnet50 --mode train --batch 8 --device cpu --validate
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from rightsize.cli._common import (
    CATALOG_OPTION,
    JSON_OPTION,
    emit_json,
    err_console,
    load_catalog_option,
    options_named,
    out_console,
)
from rightsize.estimate.memory import MAX_BATCH, MAX_IMAGE, MAX_SEQ

if TYPE_CHECKING:
    from rightsize.estimate.memory import MemoryEstimate
    from rightsize.estimate.memory_validate import MemoryValidation

GIB = 2**30


def memory(
    model: str = typer.Argument(
        ..., help="Zoo name (`rightsize models`), hf:CONFIG_DIR, hf:TYPE, model.onnx, model.pt or module:factory."
    ),
    mode: str = typer.Option("infer", "--mode", help="train | infer (a spec's training | inference also work)."),
    precision: str = typer.Option("fp32", "--precision", help="fp32 | fp16 | bf16 | int8 | int4 (weights)."),
    batch: int = typer.Option(1, "--batch", max=MAX_BATCH, help="Batch size."),
    seq: int | None = typer.Option(
        None,
        "--seq",
        max=MAX_SEQ,
        help="Sequence length (token models; default: the "
        "model's, the input column of `rightsize models`: 128 for bert-base).",
    ),
    image: int | None = typer.Option(None, "--image", max=MAX_IMAGE, help="Image size in pixels (image models)."),
    optimizer: str | None = typer.Option(None, "--optimizer", help="adamw | sgd (training; default adamw)."),
    fused: bool = typer.Option(False, "--fused", help="Fused optimizer step (no foreach temporary; training)."),
    device: str = typer.Option("cuda", "--device", help="cuda (GPU tiers) | cpu (this machine's RAM)."),
    tiers: str | None = typer.Option(
        None, "--tiers", help="GPU memory tiers: 'builtin', or GiB sizes such as '8,16,24' (default: the catalog)."
    ),
    validate: bool = typer.Option(False, "--validate", help="Also run it for real here and compare."),
    tiny: bool = typer.Option(False, "--tiny", help="Tiny model variant (tests)."),
    shape: str | None = typer.Option(None, "--shape", help="Your model's per-sample input shape, e.g. 3,224,224."),
    vocab: int | None = typer.Option(
        None,
        "--vocab",
        min=2,
        max=10_000_000,
        help="Your model takes int64 token ids below this (factory / TorchScript).",
    ),
    catalog_file: list[Path] | None = CATALOG_OPTION,
    json_out: bool = JSON_OPTION,
) -> None:
    """Estimate peak memory without allocating it (FakeTensor trace) and pick the smallest GPU tier."""
    from rightsize.errors import SpecError
    from rightsize.estimate.memory_estimate import estimate_memory
    from rightsize.estimate.memory_tiers import parse_tiers
    from rightsize.models.user_input import user_input_options
    from rightsize.workflows.precisions import int8_unquantizable

    mode = {"training": "train", "inference": "infer"}.get(mode, mode)  # the spec's words for the same modes
    if mode == "infer" and (optimizer is not None or fused):  # an inference estimate holds no optimizer state
        raise SpecError("--fused" if optimizer is None else "--optimizer", "applies to training only; add --mode "
                        "train or drop it")  # fmt: skip
    optimizer = optimizer or "adamw"
    dims, vocab = user_input_options(model, shape, vocab, seq, image)
    if precision == "int8" and (why := int8_unquantizable(model)) is not None:  # as bench, serve and plan refuse it
        raise SpecError("--precision", f"{why}; use fp32 or bf16, or export it to ONNX (a .onnx runs int8 on ONNX "
                        "Runtime)")  # fmt: skip
    kwargs: dict[str, Any] = {
        "mode": mode, "precision": precision, "batch_size": batch, "seq_len": seq, "image_size": image,
        "optimizer": optimizer, "fused": fused, "tiny": tiny, "shape": dims, "vocab": vocab,
    }  # fmt: skip
    cat = load_catalog_option(catalog_file)
    if tiers is not None and device == "cpu":  # a CPU estimate (no CUDA context) read against GPU sizes
        raise SpecError("--tiers", "lists GPU memory tiers; --device cpu is checked against this machine's RAM: "
                        "drop --tiers, or use --device cuda")  # fmt: skip
    tier_list = parse_tiers(tiers) if tiers is not None else None
    # Building and tracing a large model takes 20-50 s on 2 cores: say what is happening meanwhile.
    with (  # the estimator names its arguments ("batch: must be >= 1"): here they are options
        options_named(_OPTION_OF),
        err_console.status(f"tracing {model} ({mode}, batch {batch}) without allocating its memory…"),
    ):
        est = estimate_memory(model, device=device, catalog=cat, tiers=tier_list, **kwargs)
    val = _validate(est, model, kwargs, tiny) if validate else None
    if json_out:
        emit_json({**est.to_dict(), **({"validation": val.to_dict()} if val else {})})
        return
    _print_estimate(est)
    if val is not None:
        _print_validation(val)


_OPTION_OF = {name: f"--{name}" for name in ("batch", "seq", "image", "precision", "mode", "device")}


def _validate(est: MemoryEstimate, model: str, kwargs: dict[str, Any], tiny: bool) -> MemoryValidation:
    """Validate on this machine's device: a CUDA estimate without a GPU is re-estimated for CPU."""
    from rightsize.errors import SpecError
    from rightsize.estimate.memory_estimate import estimate_memory
    from rightsize.estimate.memory_validate import validate_memory

    local = est
    if est.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            err_console.print("no CUDA device here: validating the CPU estimate of the same configuration")
            local = estimate_memory(model, device="cpu", advise=False, **kwargs)
    if local.device == "cpu":  # building it would push a shared machine into swap or the OOM killer
        import psutil

        free = psutil.virtual_memory().available
        if local.total_bytes > 0.9 * free:
            raise SpecError("--validate", f"the estimate, {local.total_bytes / 2**30:.1f} GiB, is over 90% of the "
                            f"{free / 2**30:.1f} GiB of RAM available here; validate a smaller --batch or --seq, or "
                            "a lower --precision")  # fmt: skip
    with err_console.status("running the configuration for real…"):
        return validate_memory(local, tiny=tiny)


def _unit(total_bytes: int) -> tuple[str, int]:
    """The column's unit: MiB under 0.1 GiB (a tiny model's parts all read 0.000 GiB), else GiB."""
    return ("MiB", 2**20) if total_bytes < GIB // 10 else ("GiB", GIB)


def _amount(n: int, scale: int) -> str:
    return f"{n / scale:,.3f}" if scale == GIB else f"{n / scale:,.2f}"


def _print_estimate(est: MemoryEstimate) -> None:
    from rich import box
    from rich.table import Table

    # a user model's --shape is its input (the header had said "seq 128", a default it never ran)
    shape = (f"shape {list(est.shape)}" if est.shape else f"seq {est.seq_len}" if est.seq_len else
             f"image {est.image_size}" if est.image_size else "")  # fmt: skip
    what = " ".join(filter(None, (est.model, est.mode, est.precision, f"batch {est.batch_size}", shape, "on",
                                  est.device)))  # fmt: skip
    if est.mode == "train":
        what += f", {est.optimizer}{' fused' if est.fused else ''}"
    phase = {
        "forward_backward": "forward + backward",
        "optimizer_step": "the optimizer step",
        "optimizer_step_cpu_heap": "the optimizer step (the CPU heap still holds the activations)",
    }.get(est.peak_phase, "forward")
    out_console.print(f"[bold]{escape(what)}[/bold]: peak during {phase}", highlight=False)
    table = Table(box=box.SIMPLE)
    unit, scale = _unit(est.total_bytes)
    for col in ("component", unit, "share"):
        table.add_column(col, justify="left" if col == "component" else "right")
    for name, n in est.breakdown.items():
        if n:
            table.add_row(name.replace("_", " "), _amount(n, scale), f"{100 * n / est.total_bytes:.1f}%")
    table.add_row("total", _amount(est.total_bytes, scale), "100%", style="bold")
    out_console.print(table)
    if est.fits:
        out_console.print(f"fits: [bold]{escape(est.tier or '')}[/bold] with {est.headroom_fraction:.0%} headroom")
    else:
        out_console.print("[bold red]fits no tier[/bold red] " + escape(", ".join(t["tier"] for t in est.tiers)))
    if est.fits and est.advice:
        out_console.print("on a smaller GPU:")
    for a in est.advice:
        where = f"fits {a.tier}" if a.fits else "still does not fit"
        out_console.print(f"  - {a.detail}: {a.total_gib:,.2f} GiB{' per GPU' if a.gpus > 1 else ''} ({where})")
    out_console.print(f"[dim]traced in {est.trace_s:.1f} s; assumptions:[/dim]")
    for line in est.assumptions:
        out_console.print(f"[dim]  · {escape(line)}[/dim]", highlight=False)


def _print_validation(val: MemoryValidation) -> None:
    from rich import box
    from rich.table import Table

    out_console.print(f"[bold]validation on {val.device}[/bold] (this machine, real run)")
    table = Table(box=box.SIMPLE)
    unit, scale = _unit(max((max(r.estimated_bytes, r.measured_bytes) for r in val.rows), default=0))
    for col in ("quantity", f"estimated {unit}", f"measured {unit}", "error"):
        table.add_column(col, justify="left" if col == "quantity" else "right")
    for r in val.rows:
        table.add_row(r.quantity, _amount(r.estimated_bytes, scale), _amount(r.measured_bytes, scale),
                      f"{r.error_pct:+.1f}%")  # fmt: skip
    out_console.print(table)
    for note in val.notes:
        out_console.print(f"[dim]{escape(note)}[/dim]")


def register(app: typer.Typer) -> None:
    app.command("memory")(memory)
