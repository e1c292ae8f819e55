"""Fine-tuning memory estimate vs published peak-memory figures (LitGPT, torchtune).

    .venv/bin/python benchmarks/llm_memory_vs_published.py          # table + PASS/FAIL (< 1 s, no GPU)
    .venv/bin/python benchmarks/llm_memory_vs_published.py --json

Every ``finetune_memory_gb`` row of ``llm/data/llm_references.csv`` (a published figure with its source
URL, date and settings) is estimated by ``rightsize.llm.finetune.finetune_memory`` with that row's
settings: method, precision, optimizer, micro-batch, sequence length, checkpointing, LoRA rank / targets /
dropout, double quantisation, gradient accumulation, ZeRO stage and GPU count, and the training code (``framework``:
litgpt or torchtune, from the source). The estimate compared is
the quantity the source measured: ``peak_allocated`` (torch.cuda.max_memory_allocated) against live
tensors, ``peak_reserved`` (max_memory_reserved) against tensors plus the allocator-fragmentation
default. Both exclude the CUDA context, as the sources do.

Nothing is fitted to these rows: every constant in finetune.py comes from its derivation or from
estimate/memory.py's defaults, so there is no leave-one-source-out step to run.

Target (issue 14): LoRA / QLoRA 7B fine-tune memory within 15% of published figures. The verdict uses the
7B LoRA / QLoRA rows whose settings the source states in full (``assumed`` empty); rows with an assumed
setting (e.g. a sequence length the source does not give) are printed and summarised apart. Exit code 0
always.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
from importlib import resources
from typing import Any

from rightsize.llm.finetune import finetune_memory

TARGET_ABS_ERROR = 0.15
# reference model name -> rightsize zoo shape (Llama 2 dimensions, Touvron et al. 2023)
SHAPES = {"llama-2-7b": "llama-7b", "llama-2-13b": "llama-13b"}


def load_rows() -> list[dict[str, str]]:
    text = resources.files("rightsize.llm").joinpath("data/llm_references.csv").read_text()
    return [r for r in csv.DictReader(text.splitlines()) if r["kind"] == "finetune_memory_gb"]


def _int(v: str, default: int) -> int:
    return int(v) if v.strip() else default


def estimate(row: dict[str, str]) -> dict[str, Any]:
    """Our estimate for one published row, with the row's settings."""
    targets = tuple(row["lora_targets"].split(";")) if row["lora_targets"] else ("q", "v")
    m = finetune_memory(
        SHAPES[row["model"]], row["method"],
        batch=int(row["batch"]), seq_len=int(row["seq_len"]), precision=row["precision"],
        optimizer=row["optimizer"], lora_rank=_int(row["lora_rank"], 8), lora_targets=targets,
        lora_dropout=float(row["lora_dropout"] or 0.0), gradient_checkpointing=row["gradient_checkpointing"] == "yes",
        grad_accumulation_steps=_int(row["grad_accum_steps"], 1), double_quant=row["double_quant"] != "no",
        zero_stage=_int(row["zero_stage"], 0), gpus=_int(row["gpus"], 1), framework=_source(row["source_url"]).lower(),
    )  # fmt: skip
    ours = (m.reserved_bytes if row["metric"] == "peak_reserved" else m.allocated_bytes) / 1e9
    published = float(row["value"])
    b = m.breakdown()
    return {
        "id": row["id"], "model": row["model"], "method": row["method"], "metric": row["metric"],
        "published_gb": published, "ours_gb": round(ours, 2), "ratio": round(ours / published, 3),
        "error_pct": round(100 * (ours / published - 1), 1),
        "weights_gb": round((b["weights"] + b["quant_constants"]) / 1e9, 2),
        "activations_gb": round((b["activations"] + b["logits"]) / 1e9, 2), "peak_phase": m.peak_phase,
        "source": row["source_url"], "assumed": row["assumed"],
    }  # fmt: skip


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    errs = [abs(r["error_pct"]) for r in rows]
    if not errs:
        return {"n": 0}
    return {"n": len(errs), "median_abs_error_pct": statistics.median(errs), "worst_abs_error_pct": max(errs),
            "within_target": sum(e <= 100 * TARGET_ABS_ERROR for e in errs)}  # fmt: skip


def _source(url: str) -> str:
    return "LitGPT" if "litgpt" in url else "torchtune" if "torchtune" in url else url


# Misses whose cause was read in the sources of the software that produced the figure (printed under the table;
# nothing is fitted to them, and they stay in the verdict).
KNOWN_CAUSES = {
    "torchtune-llama2-7b-qlora-r8": (
        "a load-time spike of the quantizer of that day, not the training step. torchtune built each LoRALinear's "
        "bf16 weight on the GPU and quantized it there with torchao v0.1 (torchtune/modules/peft/lora.py at "
        "0914d5c), whose NF4 quantizer compares every element with the 16 NF4 levels at once: two "
        "[numel, 16] bf16 tensors (value - nf4, then .abs()), ~66 bytes per element, 3.0 GB for one 4096x11008 "
        "MLP weight (https://github.com/pytorch/ao/blob/v0.1/torchao/dtypes/nf4tensor.py, quantize_tensor_nearest). "
        "The table's own 'model init' column already reads 9.13 GB. torchao PR #196 (2024-05-01, 'perform in "
        "chunks') quantizes 1M elements at a time to avoid 'a large memory spike'; rightsize counts no load-time "
        "spike: with today's chunked quantizer it is ~66 MB (1M elements x 66 bytes). Counting the old "
        "spike would give ~7.0 GB, still -25%: the rest is "
        "the allocator keeping the freed spike blocks reserved"
    ),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows = [estimate(r) for r in load_rows()]
    stated = [r for r in rows if not r["assumed"]]
    target_rows = [r for r in stated if r["model"] == "llama-2-7b" and r["method"] in ("lora", "qlora")]
    s_target, s_all = summary(target_rows), summary(stated)
    s_assumed = summary([r for r in rows if r["assumed"]])
    by_source = {src: summary([r for r in rows if _source(r["source"]) == src])
                 for src in sorted({_source(r["source"]) for r in rows})}  # fmt: skip
    passed = s_target["n"] > 0 and s_target["worst_abs_error_pct"] <= 100 * TARGET_ABS_ERROR
    out = {"rows": rows, "target_rows": s_target, "stated_rows": s_all, "assumed_rows": s_assumed,
           "by_source": by_source, "target": f"|error| <= {TARGET_ABS_ERROR:.0%} on 7B LoRA/QLoRA rows",
           "pass": passed}  # fmt: skip
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"{'row':<42} {'metric':<14} {'published GB':>12} {'ours GB':>8} {'ratio':>6} {'error %':>8} "
          f"{'weights':>8} {'act+logits':>10}  peak")  # fmt: skip
    for r in rows:
        print(f"{r['id']:<42} {r['metric']:<14} {r['published_gb']:>12.2f} {r['ours_gb']:>8.2f} {r['ratio']:>6.3f} "
              f"{r['error_pct']:>+8.1f} {r['weights_gb']:>8.2f} {r['activations_gb']:>10.2f}  {r['peak_phase']}"
              f"{'  (assumed: ' + r['assumed'] + ')' if r['assumed'] else ''}")  # fmt: skip
    print()
    for name, s in (("7B LoRA/QLoRA, settings stated (target rows)", s_target), ("all rows, settings stated", s_all),
                    ("rows with an assumed setting", s_assumed),
                    *((f"source {k}", v) for k, v in by_source.items())):  # fmt: skip
        if s["n"]:
            print(f"{name}: n={s['n']} median |error| {s['median_abs_error_pct']:.1f}%, "
                  f"worst {s['worst_abs_error_pct']:.1f}%, "
                  f"within {TARGET_ABS_ERROR:.0%}: {s['within_target']}/{s['n']}")  # fmt: skip
    misses = [r for r in target_rows if abs(r["error_pct"]) > 100 * TARGET_ABS_ERROR and r["id"] in KNOWN_CAUSES]
    if misses:
        print("target rows that miss, and why (read in the sources; still counted):")
        for r in misses:
            print(f"  {r['id']} ({r['error_pct']:+.0f}%): {KNOWN_CAUSES[r['id']]}")
    print(f"target {out['target']}: {'PASS' if passed else 'FAIL'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
