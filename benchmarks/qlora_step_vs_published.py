"""QLoRA's step time over LoRA's: the per-step dequantisation model vs LitGPT's published timings.

    .venv/bin/python benchmarks/qlora_step_vs_published.py          # table (< 1 s, no GPU)
    .venv/bin/python benchmarks/qlora_step_vs_published.py --json

LitGPT's resource table (https://github.com/Lightning-AI/litgpt/blob/0cc02afa1dca7434418cf612690da13d38d294fd/
tutorials/resource-tables.md, 2023-10-27: LitGPT commit 8641822, PyTorch 2.1.0, bitsandbytes 0.41.1, one
A100-SXM4-40GB, bf16-true, micro-batch 1, Alpaca) times 1k iterations of the same fine-tune unquantised and with
bnb.nf4 / bnb.nf4-dq weights. ``rightsize finetune`` times QLoRA as LoRA's step plus ``dequant_seconds``:
``QLORA_DEQUANT_BYTES`` (read off ONE row, Llama 2 7B LoRA bnb.nf4: in-sample) per NF4 weight at the GPU's
bandwidth, a cost per step. Each row's projection adds it to the row's own published unquantised time, so only the
dequantisation is judged; the other rows (Llama 2 13B, the Adapter and Adapter v2 scripts, double quantisation)
are held out. Beside it, the factor the planner used before (QLoRA = LoRA x 1.56, from the same 7B row), which a
per-token factor carries to every step size. Exit code 0 always: no issue target names this.
"""

from __future__ import annotations

import argparse
import json
import statistics
from typing import Any

from rightsize.catalog import load_catalog
from rightsize.llm.finetune import finetune_memory
from rightsize.llm.finetune_plan import QLORA_DEQUANT_BYTES, dequant_seconds

OLD_FACTOR = 3.68 / 2.36  # the per-token factor the planner used until 2026-11-29
SOURCE = "LitGPT resource-tables.md (commit 0cc02af, 2023-10-27), A100-SXM4-40GB, micro-batch 1"
# (script, model, quantisation, minutes per 1k iterations unquantised, with it), read off the table
ROWS = [
    ("lora", "llama-7b", "bnb.nf4", 2.36, 3.68),
    ("lora", "llama-7b", "bnb.nf4-dq", 2.36, 3.83),
    ("lora", "llama-13b", "bnb.nf4", 3.19, 6.38),
    ("lora", "llama-13b", "bnb.nf4-dq", 3.19, 6.55),
    ("adapter", "llama-7b", "bnb.nf4", 1.50, 2.93),
    ("adapter", "llama-7b", "bnb.nf4-dq", 1.50, 3.00),
    ("adapter_v2", "llama-7b", "bnb.nf4", 1.81, 3.23),
    ("adapter_v2", "llama-7b", "bnb.nf4-dq", 1.81, 3.32),
]
ANCHOR = ("lora", "llama-7b", "bnb.nf4")


def evaluate() -> list[dict[str, Any]]:
    acc = load_catalog().accelerators["A100-40GB"]
    out = []
    for script, model, quant, plain, published in ROWS:
        mem = finetune_memory(model, "qlora", batch=1, seq_len=512, double_quant=quant.endswith("-dq"))
        projected = plain + dequant_seconds(mem, acc) * 1000.0 / 60.0
        old = plain * OLD_FACTOR
        out.append({"script": script, "model": model, "quant": quant, "unquantised_min": plain,
                    "published_min": published, "projected_min": round(projected, 3), "old_min": round(old, 3),
                    "error": projected / published - 1.0, "old_error": old / published - 1.0,
                    "in_sample": (script, model, quant) == ANCHOR})  # fmt: skip
    return out


def _summary(rows: list[dict[str, Any]], key: str) -> dict[str, float]:
    errs = [abs(r[key]) for r in rows if not r["in_sample"]]
    return {"n": len(errs), "median_abs_error": statistics.median(errs), "worst_abs_error": max(errs)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows = evaluate()
    summary = {"per_step": _summary(rows, "error"), "per_token_factor": _summary(rows, "old_error")}
    if args.json:
        print(json.dumps({"source": SOURCE, "dequant_bytes_per_weight": QLORA_DEQUANT_BYTES, "rows": rows,
                          "held_out": summary}, indent=2))  # fmt: skip
        return 0
    print(f"QLoRA minutes per 1k iterations, {SOURCE}; dequantisation {QLORA_DEQUANT_BYTES:.1f} B per NF4 weight")
    print(f"{'script':<11}{'model':<10}{'quant':<11}{'LoRA':>6}{'QLoRA':>7}{'per step':>9}{'err':>7}{'x1.56':>7}"
          f"{'err':>7}")  # fmt: skip
    for r in rows:
        tag = "  (in-sample: the constant's row)" if r["in_sample"] else ""
        print(f"{r['script']:<11}{r['model']:<10}{r['quant']:<11}{r['unquantised_min']:>6.2f}"
              f"{r['published_min']:>7.2f}{r['projected_min']:>9.2f}{r['error']:>+7.0%}{r['old_min']:>7.2f}"
              f"{r['old_error']:>+7.0%}{tag}")  # fmt: skip
    for name, s in summary.items():
        print(f"held out ({name}): n={s['n']} median |err| {s['median_abs_error']:.1%}, "
              f"worst {s['worst_abs_error']:.1%}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
