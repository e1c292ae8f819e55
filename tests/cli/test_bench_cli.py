"""The bench/models/results/env commands, run as a user runs them (a real subprocess)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

FAST = {"warmup": 1, "min_repeats": 3, "max_repeats": 8, "max_time_s": 1.0}


def rightsize(*args: str, store: Path, check: bool = False) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"RIGHTSIZE_STORE": str(store), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "rightsize", *args], capture_output=True, text=True, env=env, check=check, timeout=600
    )


def _spec(tmp_path: Path, **over: object) -> Path:
    spec = {"name": "t", "model": "simplenet", "tiny": True, "batch_sizes": [1, 8, 32],
            "precisions": ["fp32", "bf16"], "timing": FAST} | over  # fmt: skip
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.mark.slow
def test_bench_json_contract_and_reuse(tmp_path: Path, store_path: Path) -> None:
    spec = _spec(tmp_path)
    first = rightsize("bench", str(spec), "--json", store=store_path)
    assert first.returncode == 0, first.stderr
    records = json.loads(first.stdout)
    assert len(records) == 6  # 2 precisions x 3 batch sizes
    for r in records:
        for key in ("model", "mode", "device", "precision", "batch_size", "threads", "status", "throughput_per_s",
                    "latency_ms", "peak_memory_bytes", "flops_per_sample"):  # fmt: skip
            assert key in r
        for key in ("wall_s", "cpu_s", "run_wait_s", "loadavg", "achieved_gflops", "contention", "contention_rule",
                    "contended", "attempts", "ci_converged"):  # fmt: skip
            assert key in r["extra"], key  # the timing conditions (docs/measuring.md)
        assert r["extra"]["attempts"] >= 1 and 0 <= r["extra"]["contention"] <= 1
        assert r["status"] == "ok"
        assert r["latency_ms"]["p95"] >= r["latency_ms"]["p50"] > 0
    second = rightsize("bench", str(spec), "--json", store=store_path)
    # An uncontended stored result is reused; one timed while the machine was busy is measured again, and kept
    # ("measured again and read no better while the machine was busy; kept the stored result") only if the new
    # timing is no better (sweep.py).
    calm = [r for r in records if not r["extra"]["contended"]]
    found = re.search(r"done \((\d+) reused from the store\)", second.stderr)
    assert found is not None, second.stderr
    assert len(calm) <= int(found.group(1)) <= len(records)
    again = json.loads(second.stdout)
    assert all(r in again for r in calm)
    if len(calm) == len(records):
        assert again == records

    listed = rightsize("results", "--json", store=store_path)
    runs = json.loads(listed.stdout)  # a second run only if the second bench measured again (a busy machine)
    assert len(runs) == 1 or len(calm) < len(records)
    run = next(r for r in runs if r["n_measurements"] == 6)
    assert run["kind"] == "bench"
    out = tmp_path / "export.csv"
    rightsize("results", run["id"], "--export", str(out), store=store_path, check=True)
    assert len(out.read_text().splitlines()) == 7


@pytest.mark.parametrize(
    ("over", "line"),
    [
        ({"batch_sizes": [-1]}, "error: batch_sizes[0]: must be >= 1, got -1"),
        ({"model": "resnet5"}, "error: model 'resnet5' is not in the zoo. Did you mean 'resnet50'?"),
        ({"precisions": ["fp64"]}, "error: precisions[0]: Input should be"),
    ],
)
def test_bad_spec_exits_2_with_one_line(tmp_path: Path, store_path: Path, over: dict[str, object], line: str) -> None:
    res = rightsize("bench", str(_spec(tmp_path, **over)), store=store_path)
    assert res.returncode == 2
    assert res.stderr.startswith(line), res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert "Traceback" not in res.stderr


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="here the spec's cuda runs")
def test_a_spec_with_nothing_this_machine_can_run_says_so(tmp_path: Path, store_path: Path) -> None:
    res = rightsize("bench", str(_spec(tmp_path, devices=["cuda"], precisions=["fp16"])), store=store_path)
    assert res.returncode == 2 and "Traceback" not in res.stderr  # as plan's for the same spec (it was 1)
    assert "note: device cuda skipped: no CUDA device on this machine" in res.stderr
    assert "error: nothing measured: the spec's devices (cuda)" in res.stderr and "devices: [cpu]" in res.stderr
    assert "┏" not in res.stdout  # no empty table


@pytest.mark.slow
def test_bad_memory_limit_and_missing_spec(tmp_path: Path, store_path: Path) -> None:
    res = rightsize("bench", str(_spec(tmp_path)), "--memory-limit", "lots", store=store_path)
    assert res.returncode == 2 and res.stderr.startswith("error: --memory-limit: must be a size")
    res = rightsize("bench", str(_spec(tmp_path)), "--memory-limit", "1", store=store_path)  # ran every config to OOM
    assert res.returncode == 2 and res.stderr.startswith("error: --memory-limit: 1 is below 1GiB, where a measuring")
    res = rightsize("bench", str(tmp_path / "missing.yaml"), store=store_path)
    assert res.returncode == 2 and "not found" in res.stderr


@pytest.mark.slow
def test_memory_limit_records_failed_and_keeps_others(tmp_path: Path, store_path: Path) -> None:
    spec = _spec(tmp_path, tiny=False, batch_sizes=[1, 1_000_000], precisions=["fp32"])
    res = rightsize("bench", str(spec), "--json", "--memory-limit", "3GiB", store=store_path)
    assert res.returncode == 0, res.stderr
    small, big = json.loads(res.stdout)
    assert small["status"] == "ok"
    assert big["status"] == "failed" and big["reason"].startswith("out of memory")


@pytest.mark.slow
def test_models_and_env(store_path: Path) -> None:
    rows = json.loads(rightsize("models", "--json", store=store_path, check=True).stdout)
    by_name = {r["name"]: r for r in rows}
    assert {"simplenet", "mobilenet_v2", "resnet50", "resnet152", "distilbert", "bert-base", "gpt2"} <= set(by_name)
    assert by_name["resnet50"]["parameters"] == pytest.approx(25.6e6, rel=0.01)
    assert by_name["bert-base"]["parameters"] == pytest.approx(110e6, rel=0.01)
    env = json.loads(rightsize("env", "--json", store=store_path, check=True).stdout)
    assert env["logical_cores"] >= 1 and "isa" in env
    assert "catalog_cpu_family" in env and len(env["catalog_gpus"]) == len(env["gpus"])
    text = rightsize("env", store=store_path, check=True).stdout
    assert "catalog       CPU family " in text


@pytest.mark.slow
def test_bench_table_shows_quality_and_says_what_is_off(tmp_path: Path, store_path: Path) -> None:
    # A CI target no timing meets: the config is capped by max_time_s, so "not converged" shows, for sure.
    strict = {"warmup": 1, "min_repeats": 5, "max_repeats": 8, "target_ci": 1e-6, "max_time_s": 0.5}
    res = rightsize(
        "bench", str(_spec(tmp_path, batch_sizes=[1], precisions=["fp32"], timing=strict)), store=store_path
    )
    assert res.returncode == 0, res.stderr
    assert "quality" in res.stdout and "not converged" in res.stdout
    assert "measurement quality:" in res.stderr and "did not reach the timing's confidence target" in res.stderr


def test_quality_cells() -> None:
    from rich.console import Console

    from rightsize.cli.bench import sweep_table
    from rightsize.profile import Latency, Measurement

    lat = Latency(1.0, 1.1, 1.2, 1.0, 0.1, 10)

    def m(batch: int, **extra: object) -> Measurement:
        return Measurement("simplenet", "inference", "cpu", "fp32", batch, 1, {}, "ok", latency_ms=lat, extra=extra)

    rows = [
        m(1, contention=0.01, contended=False, ci_converged=True, attempts=1),
        m(2, contention=0.42, contended=True, ci_converged=True, attempts=3),
        m(4, contention=0.02, contended=True, gflops_vs_best=0.25, ci_converged=True, attempts=3),
        m(8, contention=0.0, contended=False, ci_converged=False, attempts=1),
        m(16, contention=0.5, contended=True, ci_converged=False, attempts=3),
    ]
    console = Console(width=250, record=True)
    console.print(sweep_table(rows, "t"))
    lines = [line for line in console.export_text().splitlines() if line.startswith("│")]
    cells = [line.split("│")[-2].strip() for line in lines]
    assert cells == [
        "ok",
        "contended 42% (3 tries)",
        "contended 2%, 0.25x best GFLOP/s (3 tries)",
        "not converged",
        "contended 50%, not converged (3 tries)",
    ]


def test_measured_power_line_names_its_window(monkeypatch: pytest.MonkeyPatch) -> None:
    from rightsize.cli import bench
    from rightsize.profile import Latency, Measurement

    lines: list[str] = []
    monkeypatch.setattr(bench.out_console, "print", lambda text, *a, **k: lines.append(str(text)))
    m = Measurement.from_dict({
        "model": "resnet50", "mode": "inference", "device": "cuda", "precision": "bf16", "batch_size": 64,
        "threads": None, "input": {}, "status": "ok", "latency_ms": Latency(8, 8, 8, 8, 0).to_dict(),
        "extra": {"power_w": 428.7, "power_source": "nvml:0", "energy_j_per_sample": 0.055, "power_window_s": 1.004},
    })  # fmt: skip
    bench._print_power([m])
    assert lines and "428.7 W over 1.0 s of runs (nvml:0;" in lines[0]


@pytest.mark.slow
def test_int8_of_a_conv_net_is_static_and_bench_says_so(
    tmp_path: Path, store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """In-process (``run_cli``): what is checked is the int8 scheme bench names, not the process around it."""
    from cli_kit import run_cli

    spec = _spec(tmp_path, model="resnet50", batch_sizes=[2], precisions=["int8"])
    code, shown, err = run_cli(["bench", str(spec), "--store", str(store_path)], capsys)
    assert code == 0, err
    assert "int8 here = static quantization: convolutions and Linear layers int8" in shown
    code, out, err = run_cli(["bench", str(spec), "--json", "--store", str(store_path)], capsys)
    [record] = json.loads(out)
    assert code == 0 and record["extra"]["int8_scheme"] == "static" and record["status"] == "ok"
    text = _spec(tmp_path, model="distilbert", batch_sizes=[2], precisions=["int8"])
    code, shown, err = run_cli(["bench", str(text), "--store", str(store_path)], capsys)
    assert code == 0 and "int8 here = dynamic quantization: Linear layers int8" in shown, err


def test_ray_addresses_are_checked_before_anything_connects() -> None:
    from rightsize.cli.bench import ray_address
    from rightsize.errors import SpecError

    for ok in ("auto", "127.0.0.1:6379", "head-node:6379", "ray://head:10001", "[::1]:6379", "ray://[fe80::1]:10001"):
        assert ray_address(ok) == ok
    for bad in ("bogus", "127.0.0.1", "head:", ":6379", "head:0", "head:99999", "head:63x", "http://head:6379",
                "a:b:6379", "[::1]", "ray://", "he ad:6379"):  # fmt: skip
        with pytest.raises(SpecError, match=r"^--ray: must be 'auto' or a cluster address HOST:PORT"):
            ray_address(bad)


def test_bench_refuses_a_mode_its_targets_cannot_plan_from(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`mode: inference` beside training targets had measured inference for 77 s and exited 0."""
    from cli_kit import run_cli

    spec = tmp_path / "t.yaml"
    spec.write_text("model: simplenet\ntiny: true\nmode: inference\ntargets:\n  training: {steps: 100}\n")
    code, _, err = run_cli(["bench", str(spec), "--store", str(tmp_path / "s.sqlite")], capsys)
    assert code == 2 and "measuring" not in err
    assert err.startswith("error: mode: inference does not fit training targets; set mode: training")


def test_bench_refuses_epochs_on_inference_and_an_empty_ray_address(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--epochs 3` on an inference spec was ignored (and re-measured every config); `--ray ''` ran locally."""
    from cli_kit import run_cli

    spec = tmp_path / "t.yaml"
    spec.write_text("model: simplenet\ntiny: true\nmode: inference\n")
    code, out, err = run_cli(["bench", str(spec), "--epochs", "3", "--store", str(tmp_path / "s.sqlite")], capsys)
    assert (code, out) == (2, "") and "measuring" not in err
    assert err.strip() == ("error: --epochs: applies to training only; the spec's mode is inference: drop --epochs or "
                           "set mode: training")  # fmt: skip
    code, _, err = run_cli(["bench", str(spec), "--ray", "", "--store", str(tmp_path / "s.sqlite")], capsys)
    assert code == 2 and err.startswith("error: --ray: must be 'auto' or a cluster address HOST:PORT")


@pytest.mark.slow  # a forkserver importing torch, then a measurement cut short: ~15 s
def test_sigterm_stops_a_sweep_as_ctrl_c_does(tmp_path: Path, store_path: Path) -> None:
    """SIGTERM (docker stop, systemd) ended bench on the spot: its run read 'running' for every reader and the
    orphaned child printed a BrokenPipe traceback."""
    import signal
    import time

    import psutil

    (tmp_path / "sleepy_model.py").write_text(
        "import time\nimport torch\n\n\nclass Sleepy(torch.nn.Module):\n"
        "    def forward(self, x):\n        if x.shape[0] == 2:\n            time.sleep(600)\n"
        "        return x * 2\n\n\n"
        "def make():\n    return Sleepy()\n"
    )  # batch 1 is measured (the run starts), batch 2 never ends
    spec = _spec(tmp_path, model="sleepy_model:make", tiny=False, batch_sizes=[1, 2], precisions=["fp32"],
                 input={"shape": [4]})  # fmt: skip
    env = os.environ | {"RIGHTSIZE_STORE": str(store_path), "PYTHONPATH": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-m", "rightsize", "bench", str(spec)], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    try:
        me, deadline = psutil.Process(proc.pid), time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:  # until batch 2's child sleeps
            if len([p for p in me.children(recursive=True) if p.ppid() != proc.pid and p.is_running()]) and (
                store_path.exists()
                and rightsize("results", "--json", store=store_path).stdout.strip() not in ("", "[]")
            ):
                break
            time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err
    assert "interrupted: 1 finished config(s) are stored" in err and "Traceback" not in err
    assert re.search(r"stopped\s.*1/2", err) and "done" not in err, err  # the bar had read "done 1/1"
    listed = rightsize("results", "--json", store=store_path, check=True)
    assert [r["status"] for r in json.loads(listed.stdout)] == ["interrupted"]


def test_ctrl_c_while_waiting_for_another_sweep_says_interrupted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bench waiting for another sweep's lock, stopped by Ctrl-C, exited 130 with no word: typer turns an uncaught
    KeyboardInterrupt into exit 130 silently. A command that said how it stopped gets no second line."""
    from cli_kit import run_cli

    import rightsize.measure.sweep as sweep

    def waiting(*_: object, **__: object) -> None:
        raise KeyboardInterrupt  # as Ctrl-C inside the lock's flock()

    monkeypatch.setattr(sweep, "run_sweep", waiting)
    spec = _spec(tmp_path, batch_sizes=[1], precisions=["fp32"])
    rc, out, err = run_cli(["bench", str(spec), "--store", str(tmp_path / "s.sqlite")], capsys)
    assert (rc, out) == (130, "") and err.endswith("\ninterrupted\n"), err

    def stopped(*_: object, **__: object) -> object:
        from rightsize.measure.env import fingerprint
        from rightsize.measure.sweep import SweepResult

        return SweepResult(None, fingerprint(), interrupted=True)

    monkeypatch.setattr(sweep, "run_sweep", stopped)
    rc, out, err = run_cli(["bench", str(spec), "--store", str(tmp_path / "s.sqlite")], capsys)
    assert (rc, out) == (130, "") and err.endswith("interrupted before a config finished: nothing new was stored\n")
    assert "\ninterrupted\n" not in err
    assert re.search(r"simplenet: stopped\s.*0/1", err) and "done" not in err, err  # it read "done 0/0"; the
    # model's name on the bar's last line: a plan comparing two engines drew two bars alike
