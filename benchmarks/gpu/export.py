"""Write a GPU calibration run's store as one JSON file (the calibration format: environment + measurements).

    python benchmarks/gpu/export.py OUT/gpu.sqlite benchmarks/gpu/results/h200-2026-11-26/measurements.json

``benchmarks/gpu/run_on_device.sh`` fills the store on a GPU machine; this keeps what it measured, with the
fingerprint of the machine that measured it, in a reviewable text file beside the run's log.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rightsize.store import Store


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("store", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--date", required=True, help="the day the run was taken (YYYY-MM-DD)")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="which measurements (cpu: the host's)")
    a = ap.parse_args()
    with Store(a.store) as db:
        ms = [m for m in db.measurements() if m.status == "ok" and m.device == a.device]
        envs = {m.env_id for m in ms}
        if len(envs) != 1:
            raise SystemExit(f"expected measurements from one machine, got {len(envs)}")
        env = db.env(envs.pop())
    payload = {
        "kind": "measurements",
        "device_class": "gpu" if a.device == "cuda" else "cpu",
        "date": a.date,
        "script": "benchmarks/gpu/run_on_device.sh (rightsize bench of benchmarks/gpu/*.yaml)"
        if a.device == "cuda"
        else "benchmarks/gpu/host/run_host.sh (rightsize bench of benchmarks/gpu/host/*.yaml)",
        "env": env.to_dict(),
        "measurements": [m.to_dict() for m in ms],
    }
    a.out.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    print(f"{len(ms)} measurements -> {a.out}")


if __name__ == "__main__":
    main()
