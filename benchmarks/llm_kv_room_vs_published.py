"""The generative planner's KV room per replica vs the KV cache vLLM itself allocated.

    .venv/bin/python benchmarks/llm_kv_room_vs_published.py          # table (< 1 s, no GPU)

Each row of ``llm/data/llm_kv_references.csv`` is a KV-block count a vLLM server logged at start-up ("# GPU blocks")
for a model, GPU and tensor-parallel degree, with its source URL and date. ``llm.plan.gpu_kv_room`` (the rule
``plan_generative`` sizes every GPU replica's KV cache with) predicts the tokens it holds, with the row's
max_model_len as the longest request vLLM profiles. Nothing is fitted to these rows. No target: issue 14's memory
target is the fine-tuning one (llm_memory_vs_published.py); this is the serving side's check. Exit code 0 always.
"""

from __future__ import annotations

import csv
import statistics
from importlib import resources

from rightsize.catalog import load_catalog
from rightsize.llm.plan import gpu_kv_room
from rightsize.llm.shape import DecoderShape

MAX_SEQS = 256  # vLLM's default max_num_seqs


def main() -> None:
    catalog = load_catalog()
    text = resources.files("rightsize.llm").joinpath("data/llm_kv_references.csv").read_text()
    print(f"{'row':38} {'GPU':10} {'tp':>2} {'vLLM tokens':>12} {'ours':>9} {'error':>7}")
    errs = []
    for r in csv.DictReader(text.splitlines()):
        shape = DecoderShape.from_zoo(r["model"])
        acc, tp = catalog.accelerators[r["gpu"]], int(r["tp"])
        room = gpu_kv_room(shape, acc, tp, shape.weight_bytes("fp16"), int(r["max_model_len"]), MAX_SEQS)
        ours = int(room / (shape.kv_bytes_per_token("fp16") / shape.kv_shards(tp)))
        theirs = int(r["kv_blocks"]) * int(r["block_tokens"])
        errs.append(ours / theirs - 1)
        print(f"{r['id']:38} {r['gpu']:10} {tp:>2} {theirs:>12,} {ours:>9,} {errs[-1]:>+7.1%}  {r['source_url']}")
    print(f"n={len(errs)} median |error| {statistics.median(abs(e) for e in errs):.1%}, "
          f"worst {max(errs, key=abs):+.1%}")  # fmt: skip


if __name__ == "__main__":
    main()
