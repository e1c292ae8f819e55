"""``rightsize finetune MODEL``: memory of a full / LoRA / QLoRA fine-tune of a decoder, the GPU instances that
hold it (ZeRO-3 when one GPU cannot), projected hours and cost (rightsize.llm.finetune, llm.finetune_plan).

    rightsize finetune llama-7b --method qlora --tokens 50e6 --batch 4 --seq 2048
"""

from __future__ import annotations

from pathlib import Path

import typer

from rightsize.cli._common import (
    CATALOG_OPTION,
    JSON_OPTION,
    check_providers,
    emit_json,
    load_catalog_option,
    options_named,
    out_console,
    split_values,
)
from rightsize.errors import SpecError
from rightsize.inputfile import check_finite, short

GIB = 2**30
MIN_MFU = 0.01  # below 1% of peak no fine-tune runs; a smaller --mfu is a typo (1e-3 for 0.3?)
# finetune_memory's field names -> this command's options, for its errors
_FLAGS = {"method": "--method", "precision": "--precision", "lora_rank": "--rank", "lora_targets": "--targets",
          "batch": "--batch", "seq_len": "--seq", "framework": "--framework"}  # fmt: skip
DEFAULT_SEQ = 2048  # --seq when not given (capped at the model's context)


def finetune(
    model: str = typer.Argument(
        ..., help="Zoo decoder (gpt2, llama-1b, llama-7b, llama-13b, llama-70b) or hf:DIR with a decoder's config.json."
    ),
    method: str = typer.Option("lora", "--method", help="full | lora | qlora."),
    tokens: float = typer.Option(..., "--tokens", help="Tokens to train on (epochs x dataset tokens), e.g. 50e6."),
    batch: int = typer.Option(
        4,
        "--batch",
        min=1,
        max=1_000_000,
        help="Micro-batch per GPU, sequences. Not scaled "
        "with the GPUs: a row's global batch is this x its GPUs (x nodes), so rows with more "
        'GPUs take fewer, larger optimizer steps (column "global batch").',
    ),
    seq: int | None = typer.Option(
        None, "--seq", min=1, max=10_000_000, help="Sequence length, tokens (default 2048, or the model's context)."
    ),
    precision: str = typer.Option(
        "bf16",
        "--precision",
        help="bf16 | fp16: pure 16-bit weights, gradients and AdamW states, 8 B/param | amp_bf16 | amp_fp16: fp32 "
        "master weights and AdamW states too, 16 B/param | fp32: 16 B/param. (`memory --precision bf16` traces "
        "torch.autocast: fp32 weights and gradients, also 16 B/param, but its activations are traced, not counted "
        "per layer, so its total differs.)",
    ),
    rank: int | None = typer.Option(None, "--rank", min=1, help="LoRA rank (lora, qlora; default 16)."),
    targets: str | None = typer.Option(
        None,
        "--targets",
        help="LoRA targets: q,k,v,o,gate,up,down,lm_head or all-linear (lora, qlora; default q,k,v,o).",
    ),
    checkpointing: bool = typer.Option(True, "--checkpointing/--no-checkpointing", help="Activation checkpointing."),
    framework: str = typer.Option(
        "hf", "--framework", help="Training code: hf (transformers + PEFT: fp32 adapters) | torchtune | litgpt."
    ),
    mfu: float = typer.Option(0.35, "--mfu", help="Model FLOPs utilisation assumed for the time, 0.01-1."),
    provider: list[str] = typer.Option([], "--provider", help="Only these providers (repeatable, or comma-separated)."),
    top: int = typer.Option(8, "--top", min=1, max=10_000, help="Options to show."),
    catalog: list[Path] | None = CATALOG_OPTION,
    json_out: bool = JSON_OPTION,
) -> None:
    """Plan a decoder fine-tune: memory per GPU, the instances that hold it, hours and cost (projected)."""
    from rich.markup import escape
    from rich.table import Table

    from rightsize.llm.finetune import finetune_memory
    from rightsize.llm.finetune_plan import (
        global_batch_note,
        plan_finetune,
        qlora_note,
        small_step_note,
        spin_up_hours,
        unverified_note,
    )
    from rightsize.llm.finetune_words import checkpointing_line, header_words, no_fit_hint, precision_line
    from rightsize.llm.shape import decoder_shape

    check_finite("--tokens", tokens, 1.0, 1e15, low_open=False)
    check_finite("--mfu", mfu, MIN_MFU, 1.0, low_open=False)
    if method == "full" and (rank is not None or targets is not None):
        raise SpecError("--rank" if rank is not None else "--targets", "applies to --method lora or qlora only; "
                        "a full fine-tune trains every weight. To fix: drop it, or pass --method lora")  # fmt: skip
    rank = 16 if rank is None else rank
    targets = "q,k,v,o" if targets is None else targets
    if not targets.strip(" \"'"):  # '' (or '""': quotes a script passed through) read "names no layer (got '""')"
        raise SpecError("--targets", "is empty; pass q,k,v,o,gate,up,down or all-linear")
    lora_targets = (
        "all-linear" if targets == "all-linear" else tuple(t.strip() for t in targets.split(",") if t.strip())
    )
    if not lora_targets:
        raise SpecError("--targets", f"names no layer (got {short(targets)}); pass q,k,v,o,gate,up,down or all-linear")
    shape = decoder_shape(model)  # one resolution for the memory and the time
    if seq is None:  # 2048, or the longest the model takes (GPT-2: 1024 learned positions)
        seq = min([DEFAULT_SEQ, *(n for n in (shape.max_context, shape.learned_positions) if n)])
    if shape.max_context and seq > shape.max_context:  # RoPE: positions past training
        raise SpecError("--seq", f"{seq} tokens, but {short(model)} was trained for {shape.max_context} "
                        f"(max_position_embeddings). To fix: --seq {shape.max_context} or less")  # fmt: skip
    if shape.learned_positions and seq > shape.learned_positions:  # GPT-2's wpe: no position past its table
        raise SpecError("--seq", f"{seq} tokens, but the learned position table of {short(model)} holds "
                        f"{shape.learned_positions}. To fix: --seq {shape.learned_positions} or less")  # fmt: skip
    if batch * seq > tokens:  # not one step: the hours and the per-step notes would describe a run that never runs
        raise SpecError("--tokens", f"{tokens:,.0f} tokens to train on, fewer than one step's {batch * seq:,} "
                        f"(--batch {batch} x --seq {seq}). To fix: --tokens {batch * seq:,} or more, or a smaller "
                        "--batch or --seq")  # fmt: skip
    with options_named(_FLAGS):
        mem = finetune_memory(shape, method, batch=batch, seq_len=seq, precision=precision, lora_rank=rank,
                              lora_targets=lora_targets, gradient_checkpointing=checkpointing,
                              framework=framework)  # fmt: skip
    cat = load_catalog_option(catalog)
    provider = split_values(provider, "--provider")
    check_providers(provider, cat)
    options = plan_finetune(shape, method, tokens=tokens, batch=batch, seq_len=seq, catalog=cat, precision=precision,
                            lora_rank=rank, lora_targets=lora_targets, gradient_checkpointing=checkpointing, mfu=mfu,
                            providers=provider or None, framework=framework)  # fmt: skip
    step_note = small_step_note(method, batch, seq)
    slow_note = qlora_note(method)
    price_note = unverified_note(options)
    batch_note = global_batch_note(options[:top], batch, tokens, seq)
    if json_out:
        emit_json({"model": model, "method": method, "framework": framework, "tokens": tokens, "mfu_assumed": mfu,
                   "batch": batch, "seq_len": seq,
                   "memory_one_gpu": mem.to_dict(), "options": [o.to_dict() for o in options[:top]],
                   "notes": [n for n in (price_note, batch_note, step_note, slow_note, None if options else
                                         f"no catalog GPU instance holds it: {no_fit_hint(mem)}")
                             if n]})  # fmt: skip
        return
    out_console.print(f"[bold]{escape(model)} {method} fine-tune[/bold] ({framework}), "
                      f"micro-batch {batch} per GPU x seq {seq}, {header_words(mem)}: "
                      f"{mem.total_bytes / GIB:.1f} GiB unsharded on one GPU "
                      f"(peak during {mem.peak_phase.replace('_', ' ')}; {mem.params_trainable:,} trainable "
                      "parameters)", highlight=False)  # fmt: skip
    parts = ", ".join(f"{k} {v / GIB:.1f}" for k, v in mem.breakdown().items() if v >= 0.05 * GIB)
    out_console.print(f"  GiB: {parts}", highlight=False)
    if (meaning := precision_line(mem)) is not None:
        out_console.print(f"  {meaning}", highlight=False)
    out_console.print(f"  {checkpointing_line(mem, shape)}", highlight=False)
    up_min = spin_up_hours() * 60
    # its own line, not the table's title: a title wraps at the table's width ("...; $ total" / "bills 9 min of ...")
    title = (f"instances that hold it, {tokens:,.0f} tokens at {mfu:.0%} MFU (assumed: hours are projected); $ total "
             f"bills {up_min:.0f} min of spin-up too")  # fmt: skip
    table = Table()
    for col in ("instance", "GPUs", "ZeRO", "global batch", "GiB/GPU", "usable", "train h", "$/h", "$ total"):
        table.add_column(col, justify="left" if col == "instance" else "right")
    for o in options[:top]:
        nodes = f"{o.nodes} nodes x " if o.nodes > 1 else ""
        table.add_row(escape(o.instance), escape(f"{nodes}{o.gpus} x {o.accelerator}"), str(o.zero_stage),
                      f"{o.global_batch:,}",
                      f"{o.gib_per_gpu:.1f}", f"{o.usable_gib_per_gpu:.1f}", f"{o.train_hours:.2f}",
                      f"{o.usd_per_hour:.2f}", f"{o.usd:,.2f}")  # fmt: skip
    if options:  # none: the "no catalog GPU instance holds it" line below is the answer, not an empty table
        out_console.print(f"  {title}", highlight=False)
        out_console.print(table)
    if price_note:
        out_console.print(f"[bold yellow]warning[/bold yellow]: {escape(price_note)}", highlight=False)
    if batch_note:
        out_console.print(f"  {batch_note}", highlight=False)
    if any(o.nodes > 1 for o in options[:top]):
        shares = sorted(o.network_share for o in options[:top] if o.nodes > 1)
        # one value when both ends print alike (read "2%-2%"); under half a percent reads "<1%", not "0%"
        low, high = (f"{s:.0%}" if s >= 0.005 else "<1%" for s in (shares[0], shares[-1]))
        out_console.print("  multi-node rows (no single node of that instance holds it): ZeRO-3 moves the weights "
                          "twice and the trained gradients once per step over "
                          f"each node's network: {low if low == high else f'{low}-{high}'} of the training time "
                          "(projected)", highlight=False)  # fmt: skip
    if step_note:
        out_console.print(f"  {step_note}", highlight=False)
    if slow_note:
        out_console.print(f"  {slow_note}", highlight=False)
    if precision in ("bf16", "amp_bf16"):
        out_console.print("  GPUs without bf16 (T4, V100) are left out; --precision fp16 plans them", highlight=False)
    if not options:
        out_console.print(f"[bold red]no catalog GPU instance holds it[/bold red]: {escape(no_fit_hint(mem))}")


def register(app: typer.Typer) -> None:
    app.command("finetune")(finetune)
