"""The local batch pipeline (multiprocessing, no Ray): ids, stages, file input and output, the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rightsize.cluster.pipeline import check_ids, make_plan, run_pipeline
from rightsize.errors import SpecError, UnsupportedError
from rightsize.spec import parse_spec
from rightsize.store import Store
from rightsize.workflows.pipeline import run_and_project


def test_check_ids_counts_missing_duplicated_and_unexpected() -> None:
    got = check_ids(np.array([0, 1, 1, 3, 7]), np.arange(4))
    assert (got.expected, got.seen, got.unique, got.missing, got.duplicated, got.unexpected) == (4, 5, 4, 1, 1, 1)
    assert not got.exactly_once
    assert check_ids(np.array([2, 0, 1]), np.arange(3)).exactly_once


def test_plan_from_spec_and_options() -> None:
    w = parse_spec({"model": "distilbert", "tiny": True, "input": {"seq_len": 64}, "batch_sizes": [1, 8],
                    "precisions": ["fp16", "bf16"]})  # fmt: skip
    plan = make_plan(w, items=10, input_path=None, ray=False, workers=2, batch_size=None, device=None, precision=None)
    assert plan.items.kind == "tokens" and plan.items.seq_len == 16 and plan.items.vocab == 1000  # tiny: 16 tokens
    assert plan.infer.precision == "bf16"  # fp16 is CUDA-only: the first precision the CPU supports
    assert plan.infer.batch_size == 8 and plan.workers == 2
    with pytest.raises(SpecError, match=r"--precision: fp16 inference is not supported on cpu; use one of bf16, fp32"):
        make_plan(w, items=10, input_path=None, ray=False, workers=1, batch_size=None, device="cpu", precision="fp16")
    # a precision no engine has read as one this device lacks ("fp12 inference is not supported ... ['bf16', ...]")
    with pytest.raises(SpecError, match=r"--precision: 'fp12' is not a precision rightsize runs; use one of bf16, "):
        make_plan(w, items=10, input_path=None, ray=False, workers=1, batch_size=None, device="cpu", precision="fp12")
    with pytest.raises(UnsupportedError):
        make_plan(parse_spec({"model": "llama-7b"}), items=1, input_path=None, ray=False, workers=1, batch_size=None,
                  device=None, precision=None)  # fmt: skip


@pytest.mark.slow  # ~2 s: in `make test`, not `make test-fast`
def test_local_pipeline_synthetic_items_exactly_once(tmp_path: Path) -> None:
    w = parse_spec({"model": "simplenet", "tiny": True, "batch_sizes": [32],
                    "targets": {"batch": {"items": 10_000_000, "deadline_hours": 2}}})  # fmt: skip
    out = tmp_path / "out.parquet"
    with Store(tmp_path / "s.sqlite") as store:
        res = run_and_project(w, items=2000, workers=2, output_path=out, store=store)
    assert res.engine == "local" and res.workers == 2 and res.items == 2000 and res.exactly_once
    import pyarrow.parquet as pq

    ids = pq.read_table(out).column("id").to_numpy()
    assert sorted(ids.tolist()) == list(range(2000))
    assert res.stages["infer"]["cpu_s"] > 0 and res.stages["write"]["wall_s"] > 0
    assert res.full_items == 10_000_000  # from targets.batch.items
    # the full job is planned by the one batch planner (plan/batch.py), bounded by the measured input stages
    plan = res.plan
    assert plan is not None and plan.kind == "batch" and "input_stage" in plan.assumptions
    rec = plan.recommendation
    assert rec is not None and rec.feasible and rec.runtime_hours is not None and rec.runtime_hours <= 2
    assert rec.throughput_per_s is not None and rec.cold_start_s is not None
    work_h = 10_000_000 / rec.throughput_per_s / 3600
    assert rec.runtime_hours == pytest.approx(work_h + rec.cold_start_s / 3600, rel=0.02)
    assert any("input pipeline" in n or "share the cores" in n for n in rec.notes)


@pytest.mark.slow
def test_local_pipeline_reads_a_jsonl_file_with_its_own_ids(tmp_path: Path) -> None:
    ids = list(range(1000, 1600, 3))  # 200 non-contiguous ids
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": i, "text": f"review number {i} was fine"}) + "\n" for i in ids))
    w = parse_spec({"model": "distilbert", "tiny": True, "batch_sizes": [8]})
    out = tmp_path / "out.jsonl"
    res = run_and_project(w, input_path=src, output_path=out, workers=1)
    assert res.items == 200 and res.exactly_once and res.ids.expected == 200
    assert sorted(json.loads(line)["id"] for line in out.read_text().splitlines()) == ids
    assert res.stages["read"]["wall_s"] > 0  # the file read, timed in the driver
    assert not any("worker processes on" in n for n in res.notes)


@pytest.mark.slow  # a few seconds: make test runs it, test-fast does not
def test_more_local_workers_than_cores_says_what_it_costs(tmp_path: Path) -> None:
    import os

    w = parse_spec({"model": "simplenet", "tiny": True, "batch_sizes": [32]})
    workers = (os.cpu_count() or 1) + 2
    res = run_and_project(w, items=200, workers=workers, output_path=tmp_path / "o.jsonl")
    assert res.exactly_once and f"{workers} worker processes on {os.cpu_count()} cores" in " ".join(res.notes)


def test_more_local_workers_than_the_machine_can_hold_are_refused_before_any_starts() -> None:
    """--workers 1024 started 1024 processes, each importing torch: the 24 GiB machine ran out of memory."""
    import os

    from rightsize.cluster.pipeline import LOCAL_WORKERS_PER_CORE, most_local_workers

    cores = os.cpu_count() or 1
    most = most_local_workers(cores)
    assert 1 <= most <= LOCAL_WORKERS_PER_CORE * cores
    w = parse_spec({"model": "simplenet", "tiny": True})
    with pytest.raises(SpecError, match=rf"^--workers: 1024 local processes on {cores} cores: each imports torch .* "
                       rf"at most {most} here: leave it out for one per core, or use --ray$"):  # fmt: skip
        make_plan(w, items=20, input_path=None, ray=False, workers=1024, batch_size=None, device=None, precision=None)
    assert make_plan(w, items=20, input_path=None, ray=True, workers=1024, batch_size=None, device=None,
                     precision=None).workers == 1024  # a cluster's actors: Ray places them  # fmt: skip


def test_file_without_the_payload_column_is_a_spec_error(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text('{"id": 1, "body": "x"}\n')
    w = parse_spec({"model": "distilbert", "tiny": True})
    with pytest.raises(SpecError, match="'text' column"):
        run_pipeline(w, input_path=src, workers=1)


@pytest.mark.slow  # ~2 s: in `make test`, not `make test-fast`
def test_cli_pipeline_json_and_artifact(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rightsize.cli.app import main
    from rightsize.store import Store

    spec = tmp_path / "s.yaml"
    spec.write_text(json.dumps({"name": "emb", "model": "simplenet", "tiny": True, "batch_sizes": [16]}))
    db = tmp_path / "s.sqlite"
    with pytest.raises(SystemExit) as exit_info:
        main(["pipeline", str(spec), "--items", "600", "--workers", "1", "--full-items", "5000000", "--json",
              "--store", str(db)])  # fmt: skip
    assert exit_info.value.code == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["items"] == 600 and payload["ids"]["exactly_once"] is True and payload["full_items"] == 5_000_000
    assert {"read", "preprocess", "infer", "write"} <= set(payload["stages"])
    assert "no batch deadline" in " ".join(payload["notes"])
    with Store(db) as store:
        arts = store.artifacts("pipeline")
    assert len(arts) == 1 and arts[0]["id"] == payload["artifact_id"] and arts[0]["payload"]["items"] == 600
    cands = arts[0]["payload"]["plan"]["candidates"]  # stored whole, as `plan` stores its plans
    assert cands and {"gpu", "cpu"} == {c["device_class"] for c in cands}  # CPU and GPU instances, one table
    # printed as `plan --json` prints: the --top 10 (it had printed all ~800 candidates, 1.8 MB)
    assert payload["plan"]["candidates"] == cands[:10] and len(cands) > 10


@pytest.mark.slow  # a few seconds beside two busy processes
def test_a_run_beside_other_work_says_its_throughput_reads_low(tmp_path: Path) -> None:
    """On a shared machine `pipeline` measured 8.8 items/s beside a plan at 30 items/s, and said nothing of why."""
    import contextlib
    import os
    import signal
    import subprocess
    import sys

    # other work: two busy loops outside this process's tree (a shell starts them and exits), each ending itself
    # after 30 s; children of the test would count as the run's own CPU
    spin = "import time; t = time.time(); [0 for _ in iter(lambda: time.time() - t < 30, False)]"
    start = f'for i in 1 2; do "{sys.executable}" -c "{spin}" >/dev/null 2>&1 & echo $!; done'
    pids = [int(p) for p in subprocess.run(["sh", "-c", start], capture_output=True, text=True).stdout.split()]
    try:
        w = parse_spec({"model": "simplenet", "tiny": True, "batch_sizes": [32]})
        res = run_and_project(w, items=3000, workers=1)
    finally:
        for pid in pids:  # killed by their own pid: never left spinning
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert res.exactly_once
    assert any(n.startswith("other processes kept ") and "measured throughput reads low" in n for n in res.notes)
