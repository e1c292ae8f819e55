"""Turn a lent machine's host-CPU run (``run_host.sh``'s measurements.json) into reference-set rows.

    python benchmarks/gpu/host/reference_rows.py benchmarks/gpu/results/h200-host-2026-11-27/measurements.json

Prints CSV rows in ``catalog/data/reference/published.csv``'s columns (no header), one per measured config: the
median time of one batch on ``threads`` cores. The host's clock is read from the run itself: the median of the
single-thread GEMM probe each config recorded (``extra.core_gemm_gflops``), read as the CPU anchor reads it
(``Anchor.effective_family``: the family's fp32 peak per cycle at the probe's usual share of it).
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from pathlib import Path

from rightsize.catalog import load_catalog
from rightsize.estimate.reference import Anchor

FAMILY = "intel-sapphire-rapids"  # the catalog family with the host's ISA (AVX-512, AMX bf16 and int8)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("measurements", type=Path)
    ap.add_argument("--source", default="rightsize-bench-h200-host-2026-11-27")
    a = ap.parse_args(argv)
    d = json.loads(a.measurements.read_text(encoding="utf-8"))
    ms = [m for m in d["measurements"] if m["device"] == "cpu" and m["status"] == "ok"]
    probes = [float(m["extra"]["core_gemm_gflops"]) for m in ms if m["extra"].get("core_gemm_gflops")]
    # the clock the anchor reads off a probe (Anchor.effective_family), for the catalog family the rows name
    anchor = Anchor(load_catalog("").cpus[FAMILY], (), core_gflops=statistics.median(probes))
    clock = anchor.effective_family.sustained_ghz
    env = d["env"]
    software = f"rightsize bench, PyTorch {env['torch']} eager (bf16: autocast; int8: dynamic quantization)"
    title = (
        f"rightsize bench on the host CPU of a lent NVIDIA H200 machine ({env['cpu_model']}, "
        f"{env['physical_cores']} cores, AMX)"
    )
    w = csv.writer(sys.stdout, lineterminator="\n")
    for m in sorted(ms, key=lambda m: (m["model"], m["precision"], m["threads"], m["batch_size"])):
        inp = m["input"]
        size = f"i{inp['image_size']}" if "image_size" in inp else f"s{inp['seq_len']}"
        lat = m["latency_ms"]
        conv = "timing converged" if m["extra"].get("ci_converged", True) else "timing did not converge"
        note = f"Emerald Rapids (family 6 model 207) in a KVM guest, no SMT; median of {lat['n']} batches, {conv}"
        w.writerow([
            f"h200host-{m['model']}-{m['precision']}-{size}-b{m['batch_size']}-t{m['threads']}", a.source, m["model"],
            m["mode"], m["batch_size"], inp.get("seq_len", ""), inp.get("image_size", ""), m["precision"], "cpu",
            FAMILY, "", m["threads"], m["threads"], software, "latency_ms", round(lat["p50"], 3), str(a.measurements),
            title, d["date"], note, "", round(clock, 2),
        ])  # fmt: skip
    print(f"{len(ms)} rows; host clock {clock:.2f} GHz from {len(probes)} GEMM probes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
