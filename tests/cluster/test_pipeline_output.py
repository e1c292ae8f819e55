"""`pipeline --output`: the file appears whole when the run finishes; a run stopped half-way leaves the old one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rightsize.cluster.pipeline import ResultWriter


@pytest.mark.parametrize("name", ["out.jsonl", "out.parquet"])
def test_an_unfinished_run_leaves_an_existing_output_as_it_was(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(b"precious\n")
    writer = ResultWriter(path)
    writer.write({"id": [1, 2], "label": [0, 1], "score": [0.5, 0.25]})
    assert path.read_bytes() == b"precious\n"  # was emptied when the run started
    writer.close()  # Ctrl-C, a crash: not kept
    assert path.read_bytes() == b"precious\n" and [p.name for p in tmp_path.iterdir()] == [name]
    writer = ResultWriter(path)
    writer.write({"id": [1, 2], "label": [0, 1], "score": [0.5, 0.25]})
    writer.close(keep=True)
    assert [p.name for p in tmp_path.iterdir()] == [name]
    if name.endswith(".jsonl"):
        assert [json.loads(line)["id"] for line in path.read_text().splitlines()] == [1, 2]
    else:
        import pyarrow.parquet as pq

        assert pq.read_table(path).column("id").to_pylist() == [1, 2]


def test_a_full_disk_is_one_line_and_leaves_no_partial_file(tmp_path: Path) -> None:
    """ENOSPC mid-run was a 60-line chained traceback and left `.out.jsonl.PID.partial` behind; a NaN score was
    written as `nan`, which no JSON reader takes."""
    import subprocess
    import sys

    path = tmp_path / "out.jsonl"
    path.write_text("precious\n")
    code = (
        "import resource, signal, sys\n"
        "from pathlib import Path\n"
        "from rightsize.cluster.pipeline import ResultWriter\n"
        "from rightsize.errors import SpecError\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\n"
        "w = ResultWriter(Path(sys.argv[1]))\n"
        "try:\n"
        "    for _ in range(100):\n"
        "        w.write({'id': list(range(100)), 'label': [0] * 100, 'score': [0.5] * 100})\n"
        "    w.close(keep=True)\n"
        "except SpecError as exc:\n"
        "    w.close()\n"
        "    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=60)
    assert done.stdout.startswith(f"--output: cannot write {str(path)!r} (File too large); an existing file"), done
    assert "Traceback" not in done.stderr
    assert path.read_text() == "precious\n" and [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]
    writer = ResultWriter(path)
    writer.write({"id": [1], "label": [0], "score": [float("nan")]})
    writer.close(keep=True)
    assert json.loads(path.read_text()) == {"id": 1, "label": 0, "score": None}


def test_the_input_file_is_never_the_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--input same.jsonl --output same.jsonl` replaced the items with the results, exit 0."""
    from cli_kit import run_cli

    spec = tmp_path / "s.yaml"
    spec.write_text("model: distilbert\ntiny: true\nbatch_sizes: [2]\ninput: {seq_len: 8}\n"
                    "targets: {batch: {items: 100, deadline_hours: 1}}\n")  # fmt: skip
    items = tmp_path / "same.jsonl"
    items.write_text('{"text": "keep me"}\n')
    argv = ["pipeline", str(spec), "--input", str(items), "--output", str(tmp_path / "." / "same.jsonl")]
    rc, out, err = run_cli([*argv, "--store", str(tmp_path / "st.sqlite")], capsys)
    assert (rc, out) == (2, "") and err.startswith("error: --output: is the --input file")
    assert items.read_text() == '{"text": "keep me"}\n'


def test_ctrl_c_says_how_far_it_got_and_what_was_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C of `pipeline --output X` printed 'interrupted' and nothing of what was done or kept."""
    import rightsize.cluster.pipeline as pipeline
    from rightsize.errors import STOP_LINES
    from rightsize.spec import parse_spec

    def stopped(plan: object, sink: object) -> None:
        sink({"id": [0, 1, 2], "label": [0, 1, 0], "score": [0.5, 0.5, 0.5]})  # type: ignore[operator]
        raise KeyboardInterrupt

    monkeypatch.setattr(pipeline, "run_local", stopped)
    out = tmp_path / "out.jsonl"
    out.write_text("precious\n")
    STOP_LINES.clear()
    with pytest.raises(KeyboardInterrupt):
        pipeline.run_pipeline(parse_spec({"model": "simplenet", "tiny": True}), items=100, workers=1, output_path=out)
    said = list(STOP_LINES)
    assert said == [f"interrupted after 3 of 100 items: {str(out)!r} is left as it was (an unfinished run writes no "
                    "output) and nothing is stored"]  # fmt: skip
    assert out.read_text() == "precious\n"


@pytest.fixture(scope="module")
def pipeline_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One store for the pipelines below: tiny simplenet is measured once, and the other format's run reuses it
    (what they check is the output file, not the measuring)."""
    return tmp_path_factory.mktemp("pipeline") / "st.sqlite"


@pytest.mark.slow  # ~5 s on 2 cores: kept out of make test-fast
@pytest.mark.parametrize("name", ["out.jsonl", "out.parquet"])
def test_a_file_the_pipeline_did_not_write_is_never_replaced(
    tmp_path: Path, name: str, pipeline_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`pipeline --output user.jsonl` replaced a user's own file with the results, exit 0 (report -o and results
    --export refuse one); a pipeline's own output is written again."""
    from cli_kit import run_cli

    spec = tmp_path / "s.yaml"
    spec.write_text(
        "model: simplenet\ntiny: true\nbatch_sizes: [2]\ntargets: {batch: {items: 10, deadline_hours: 1}}\n"
    )
    out = tmp_path / name
    out.write_bytes(b'{"mine": "precious"}\n')
    argv = ["pipeline", str(spec), "--items", "10", "--output", str(out), "--store", str(pipeline_store)]
    rc, stdout, err = run_cli(argv, capsys)
    assert (rc, stdout) == (2, "") and err.startswith("error: --output: '") and err.endswith(
        f"{name}' exists and was not written by rightsize; its contents would be lost: choose another file, or remove "
        "it first\n"), err  # fmt: skip
    assert out.read_bytes() == b'{"mine": "precious"}\n'
    out.unlink()
    assert run_cli(argv, capsys)[0] == 0 and out.stat().st_size > 0
    assert run_cli(argv, capsys)[0] == 0  # its own results: replaced by the next run's


@pytest.mark.slow  # ~2 s on 2 cores: kept out of make test-fast
def test_a_stop_after_the_run_says_the_output_was_written_and_what_was_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while the model was measured for the plan said only "nothing was planned", though --output had already
    been replaced with every row (and an unfinished run's stop says it writes no output)."""
    import rightsize.workflows.pipeline as workflow
    from rightsize.errors import STOP_LINES
    from rightsize.spec import parse_spec

    def stopped(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(workflow, "plan_full_job", stopped)
    out = tmp_path / "out3.jsonl"
    out.write_text('{"id": 1, "label": 0, "score": 0.5}\n')
    w = parse_spec({"model": "simplenet", "tiny": True, "batch_sizes": [8]})
    STOP_LINES.clear()
    with pytest.raises(KeyboardInterrupt):
        workflow.run_and_project(w, items=40, workers=1, output_path=out)
    assert len(out.read_text().splitlines()) == 40  # written whole before the stop, as the line says
    assert list(STOP_LINES) == [
        f"the pipeline had finished before the stop: its 40 output rows are written to {str(out)!r}; lost: the full "
        "job's plan and this run's record (its throughput and stage times are not stored): run it again to plan"
    ]
