"""Fit the projection's time models to the published reference set and write calibration/projection_fit.json.

    .venv/bin/python scripts/fit_projection.py          # ~1 minute: traces the reference models, fits, LOSO

Inputs (all shipped): ``catalog/data/reference/published.csv`` (published results, each with source URL
and date), ``catalog/data/calibration/*.json`` (this project's own CPU measurements that anchor the CPU
model). Output: the fitted GPU/CPU parameters, the bands from the leave-one-source-out error, and the
held-out ratio of every row. ``tests/estimate/test_fit_file.py`` checks the shipped file against a re-fit.
Commit the output file.
"""

from __future__ import annotations

import json
import sys

from rightsize.catalog import load_catalog
from rightsize.estimate.calibration import calibration_dir
from rightsize.estimate.fitting import fit_payload, run_reference_evaluation
from rightsize.estimate.projection import FIT_FILE


def main() -> int:
    ev, _rows, inputs = run_reference_evaluation(load_catalog(""))  # the shipped tables only
    payload = fit_payload(ev, inputs)
    out = calibration_dir() / FIT_FILE
    out.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    s = payload["held_out"]["summary"]["all"]
    print(f"wrote {out}: {ev.fit.rows} rows fitted; held out: {s}", file=sys.stderr)
    for r, why in ev.skipped:
        print(f"  skipped {r.id}: {why}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
