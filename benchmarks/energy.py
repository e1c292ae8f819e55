"""Energy per inference and per job, from published throughput and the product's power model.

    .venv/bin/python benchmarks/energy.py

For every (model, mode, device) in the reference set (catalog/data/reference/published.csv, each row with
its source) the best published throughput is turned into energy with rightsize's power model
(catalog/data/power.csv: Cloud Carbon Footprint's per-device and per-vCPU watts at full use; a GPU
without a row uses 11.5%-102% of its datasheet TDP):

    J per sample  = device watts at full use / published samples per second
    kWh per job   = J per sample x job size / 3.6e6   (inference: 1M requests; training: one ImageNet-1k
                    epoch of 1,281,167 images for ResNet-50, 1M sequences for BERT)

Device watts only (no host, no PUE; the planner adds both). On a machine with RAPL (/sys/class/powercap)
or NVML the modelled watts would be checked against measured ones; this prints SKIPPED where neither
exists, with the reason. Exit 0 unless the table is empty.
"""

from __future__ import annotations

import csv
import io
import sys
from importlib import resources
from pathlib import Path

from rightsize.catalog import load_catalog
from rightsize.plan.energy import GPU_IDLE_FRACTION, GPU_MAX_OVER_TDP

IMAGENET_EPOCH = 1_281_167
JOB = {"training": {"resnet50": IMAGENET_EPOCH}, "inference": {}}


def _rows() -> list[dict[str, str]]:
    text = (resources.files("rightsize.catalog") / "data" / "reference" / "published.csv").read_text()
    return list(csv.DictReader(io.StringIO(text)))


def device_watts(row: dict[str, str]) -> tuple[float, str]:
    """Modelled watts of the device(s) a published row ran on, at full use."""
    table = load_catalog("").power
    assert table is not None  # the shipped catalog always carries it
    if row["device_class"] == "cpu":
        _, hi = table.cpu.get(row["device"], table.cpu["intel-cascade-lake"])
        threads = int(row["threads"] or row["cores"] or 1)
        return threads * hi, f"{threads} vCPU x {hi:g} W"
    gpus = int(row["gpus"] or 1)
    if row["device"] in table.gpu:
        return gpus * table.gpu[row["device"]][1], f"{gpus} x {table.gpu[row['device']][1]:g} W (CCF)"
    acc = load_catalog("").accelerators.get(row["device"])
    tdp = acc.tdp_w if acc else 300.0
    return (
        gpus * tdp * GPU_MAX_OVER_TDP,
        f"{gpus} x {tdp * GPU_MAX_OVER_TDP:g} W (TDP proxy, idle {GPU_IDLE_FRACTION:.1%})",
    )


def samples_per_s(row: dict[str, str]) -> float:
    """Published throughput, or batch / latency for latency rows."""
    if row["metric"] == "throughput_per_s":
        return float(row["value"])
    return int(row["batch_size"]) * 1000.0 / float(row["value"])


def measured_power_available() -> str | None:
    """Why modelled watts cannot be checked here (None: a counter exists)."""
    if Path("/sys/class/powercap/intel-rapl:0/energy_uj").exists():
        return None
    try:
        import pynvml  # noqa: F401

        return None
    except ImportError:
        return "no RAPL counters (/sys/class/powercap) and no NVML on this machine"


def main() -> int:
    best: dict[tuple[str, str, str], dict[str, str]] = {}
    for r in _rows():
        rate = samples_per_s(r)
        key = (r["model"], r["mode"], r["device"])
        if key not in best or rate > samples_per_s(best[key]):
            best[key] = r
    head = f"{'model':<13}{'mode':<10}{'device':<15}{'prec':<6}{'batch':>6}{'samples/s':>11}{'watts':>8}"
    head += f"{'J/sample':>10}{'kWh/job':>10}  job / source"
    print(head)
    print("-" * len(head))
    n = 0
    for (model, mode, device), r in sorted(best.items()):
        watts, _ = device_watts(r)
        rate = samples_per_s(r)
        joules = watts / rate
        size = JOB[mode].get(model, 1_000_000)
        basis = "ImageNet epoch" if size == IMAGENET_EPOCH else ("1M samples" if mode == "training" else "1M requests")
        kwh = joules * size / 3.6e6
        print(f"{model:<13}{mode:<10}{device:<15}{r['precision']:<6}{r['batch_size']:>6}{rate:>11.1f}{watts:>8.0f}"
              f"{joules:>10.3f}{kwh:>10.3f}  {basis} / {r['source']}")  # fmt: skip
        n += 1
    why = measured_power_available()
    print()
    print(f"{n} (model, mode, device) rows; modelled vs measured power: " + (f"SKIPPED ({why})" if why else "run"))
    return 0 if n else 1


if __name__ == "__main__":
    sys.exit(main())
