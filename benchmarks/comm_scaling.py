"""Data-parallel scaling: the all-reduce model (rightsize.plan.comm) against published multi-GPU results.

    .venv/bin/python benchmarks/comm_scaling.py

Published (docs/sources.md `scaling`): NVIDIA DeepLearningExamples ResNet-50 v1.5 (PyTorch), 8 GPUs in
one node vs 1: A100 TF32 7.72x, A100 AMP 6.72x, V100 FP32 7.76x, V100 AMP 6.93x (strong scaling at the
README's per-GPU batch 256). Single-GPU step times come from the reference set's published
single-GPU throughput (lambda-dl-benchmark-2024 rows, their own batch sizes), scaled to batch 256 per
GPU; links from catalog/data/interconnect.csv (p4d: NVSwitch 300 GB/s each way; V100 SXM2 NVLink taken
as 150 GB/s each way). Prints modelled vs published efficiency and the gap in points; the target is
within 15 points. The model counts only the gradient all-reduce: input pipeline, stragglers and
kernel-level interference are not in it, so it is optimistic where those dominate (AMP: faster compute
leaves them exposed) — the table shows where.
"""

from __future__ import annotations

import csv
import io
import sys
from importlib import resources

from rightsize.plan.comm import Links, all_reduce

RESNET50_PARAMS = 25.557e6  # torchvision / HF ResNet-50 (the zoo's count)
PUBLISHED = [  # (device, precision, reference-set row for 1-GPU throughput, 8-GPU speedup, links)
    ("A100-40GB", "tf32", "lambda-a100-40gb-resnet50-tf32", 7.72, Links(400, 300, "p4d.24xlarge")),
    ("A100-40GB", "fp16", "lambda-a100-40gb-resnet50-fp16", 6.72, Links(400, 300, "p4d.24xlarge")),
    ("V100-16GB", "fp32", "lambda-v100-16gb-resnet50-fp32", 7.76, Links(25, 150, "V100 SXM2 NVLink")),
    ("V100-16GB", "fp16", "lambda-v100-16gb-resnet50-fp16", 6.93, Links(25, 150, "V100 SXM2 NVLink")),
]
TARGET_POINTS = 15.0


def _throughput(row_id: str) -> float:
    text = (resources.files("rightsize.catalog") / "data" / "reference" / "published.csv").read_text()
    for r in csv.DictReader(io.StringIO(text)):
        if r["id"] == row_id:
            return float(r["value"])
    raise KeyError(row_id)


def main() -> int:
    grads = RESNET50_PARAMS * 4  # fp32 gradients under AMP too
    print(f"{'device':<11}{'prec':<6}{'1-GPU img/s':>12}{'step ms':>9}{'all-reduce ms':>15}{'modelled':>10}"
          f"{'published':>11}{'gap pts':>9}  verdict")  # fmt: skip
    gaps = []
    for device, prec, row, speedup, links in PUBLISHED:
        rate = _throughput(row)
        step_ms = 256 / rate * 1e3
        ar = all_reduce(grads, per_node=8, nodes=1, links=links, compute_ms=step_ms)
        modelled = step_ms / (step_ms + ar.exposed_ms)
        published = speedup / 8
        gap = (modelled - published) * 100
        gaps.append(abs(gap))
        verdict = "ok" if abs(gap) <= TARGET_POINTS else "MISS"
        print(f"{device:<11}{prec:<6}{rate:>12.0f}{step_ms:>9.0f}{ar.intra_ms:>15.2f}{modelled:>10.0%}"
              f"{published:>11.1%}{gap:>+9.1f}  {verdict}")  # fmt: skip
    worst = max(gaps)
    print(
        f"\nworst gap {worst:.1f} points (target <= {TARGET_POINTS:g}): {'PASS' if worst <= TARGET_POINTS else 'FAIL'}"
    )
    print("multi-node (2-4 nodes): no published ResNet-50/BERT DDP figure with its network in the reference set yet; "
          "not checked")  # fmt: skip
    return 0 if worst <= TARGET_POINTS else 1


if __name__ == "__main__":
    sys.exit(main())
