"""Measure this machine for projection calibration and write catalog/data/calibration/<kind>-<env id>.json.

    .venv/bin/python scripts/calibrate_cpu.py                 # zoo models, fp32+bf16, threads 1 and 2
    .venv/bin/python scripts/calibrate_cpu.py --models resnet50 distilbert --batches 1 8 --max-time 2
    .venv/bin/python scripts/calibrate_cpu.py --device cuda   # on a GPU machine: fp32/bf16/fp16 sweeps

Runs the real inference sweep (``rightsize.measure.sweep.run_sweep``) for each model at two thread
counts (the pair that fits the Amdahl parallel fraction) and records the environment fingerprint,
the load average while it ran, and the exact settings. ``rightsize.estimate.calibration`` refits
from these files on load; nothing here is typed in by hand. Commit the output file.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rightsize.profile import Environment

DEFAULT_MODELS = ["simplenet", "mobilenet_v2", "resnet50", "distilbert", "bert-base", "gpt2"]
OUT_DIR = Path(__file__).resolve().parents[1] / "src" / "rightsize" / "catalog" / "data" / "calibration"


def _write(
    args: argparse.Namespace,
    argv: list[str] | None,
    env: Environment,
    measurements: list[dict[str, Any]],
    notes: list[str],
    load_before: tuple[float, float, float],
    start: float,
) -> Path:
    env_saved = {k: v for k, v in env.to_dict().items() if k != "hostname"}  # the hostname is not a performance fact
    payload = {
        "kind": "measurements",
        "device_class": "gpu" if args.device == "cuda" else "cpu",
        "date": dt.date.today().isoformat(),
        "script": "scripts/calibrate_cpu.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "wall_s": round(time.perf_counter() - start, 1),
        "notes": sorted(set(notes)),
        "env": env_saved,
        "measurements": measurements,
    }
    out: Path = args.out or OUT_DIR / f"{payload['device_class']}-{env.id}.json"
    out.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=DEFAULT_MODELS)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--modes", nargs="+", default=["inference"], choices=["inference", "training"])
    ap.add_argument("--precisions", nargs="+", default=None, help="default: fp32 bf16 (cpu); fp32 bf16 fp16 (cuda)")
    ap.add_argument("--batches", nargs="+", type=int, default=[1, 8])
    ap.add_argument("--threads", nargs="+", type=int, default=None, help="CPU thread counts (default: 1 and all cores)")
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--max-time", type=float, default=3.0, help="seconds per config")
    ap.add_argument("--tiny", action="store_true", help="tiny model variants (smoke test only; do not commit)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)

    from rightsize.measure.env import fingerprint
    from rightsize.measure.probe import core_gemm_gflops
    from rightsize.measure.sweep import run_sweep
    from rightsize.spec import parse_spec

    env = fingerprint()
    cores = env.physical_cores
    threads: list[int | None] = list(args.threads or sorted({1, cores}))
    precisions = args.precisions or (["fp32", "bf16"] if args.device == "cpu" else ["fp32", "bf16", "fp16"])
    measurements: list[dict[str, Any]] = []
    notes: list[str] = []
    load_before = os.getloadavg()
    start = time.perf_counter()
    for mode in args.modes:
        for model in args.models:
            spec = parse_spec(
                {
                    "name": f"calibration-{model}",
                    "model": model,
                    "mode": mode,
                    "input": {"seq_len": args.seq_len, "image_size": args.image_size},
                    "batch_sizes": args.batches,
                    "precisions": precisions,
                    "devices": [args.device],
                    "threads": threads if args.device == "cpu" else [None],
                    "tiny": args.tiny,
                    "timing": {
                        "warmup": 2,
                        "min_repeats": 3,
                        "max_repeats": 50,
                        "target_ci": 0.1,
                        "max_time_s": args.max_time,
                    },
                }
            )
            t0 = time.perf_counter()
            speed = core_gemm_gflops() if args.device == "cpu" else None
            result = run_sweep(spec, None, env=env)
            notes += result.notes
            for m in result.measurements:  # the core's speed around this model's sweep (see measure/probe.py)
                d = m.to_dict()
                if speed is not None and "core_gemm_gflops" not in d["extra"]:
                    d["extra"]["core_gemm_gflops"] = round((speed + core_gemm_gflops()) / 2, 2)
                measurements.append(d)
            ok = sum(m.status == "ok" for m in result.measurements)
            print(
                f"{mode} {model}: {ok}/{len(result.measurements)} ok in {time.perf_counter() - t0:.0f} s",
                file=sys.stderr,
            )
            _write(args, argv, env, measurements, notes, load_before, start)  # keep what is done if stopped
            if result.interrupted:
                break
    out = _write(args, argv, env, measurements, notes, load_before, start)
    print(f"wrote {out} ({len(measurements)} measurements)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
