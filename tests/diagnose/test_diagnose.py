"""`rightsize diagnose`: a deliberately starved loop and a healthy one, watched for real, diagnosed apart."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import rightsize.diagnose
from rightsize.diagnose import LoopFacts, diagnose
from rightsize.diagnose.probe import LoaderInfo

SCRIPT = Path(__file__).with_name("loop_script.py")


def _cli(kind: str) -> dict:  # type: ignore[type-arg]
    run = subprocess.run(
        [sys.executable, "-m", "rightsize", "diagnose", "--json", "--", sys.executable, str(SCRIPT), kind],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-600:]
    return json.loads(run.stdout)


@pytest.mark.slow
def test_starved_loop_is_told_to_add_loader_workers() -> None:
    report = _cli("starved")
    facts = report["facts"]
    assert facts["batches"] == 12 and facts["steps"] == 12  # 3 epochs x 4 batches, one step each
    assert facts["data_wait_fraction"] > 0.5  # 4 ms per sample x 64 per batch against ~2 ms of compute
    assert facts["loaders"] == [{"num_workers": 0, "pin_memory": False, "batch_size": 64}]
    first = report["findings"][0]
    assert (first["check"], first["severity"]) == ("input pipeline", "problem")
    assert "num_workers=" in first["fix"] and "num_workers=0" in first["evidence"]


@pytest.mark.slow
def test_timeout_stops_the_program_and_diagnoses_the_steps_it_ran() -> None:
    # --timeout stops the program with SIGTERM (a quiet SystemExit in it: its exit handlers, the probe's report
    # among them, still run; SIGINT, then SIGKILL only if it ignores that), and exits 124 as coreutils `timeout`
    run = subprocess.run(
        [sys.executable, "-m", "rightsize", "diagnose", "--json", "--timeout", "12", "--", sys.executable,
         str(SCRIPT), "forever"], capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 124, run.stderr[-600:]
    assert json.loads(run.stdout)["facts"]["steps"] > 0 and "stopped after --timeout 12 s" in run.stderr
    assert "Traceback" not in run.stderr


@pytest.mark.slow  # ~3 s on 2 cores: kept out of make test-fast
def test_a_command_that_cannot_run_is_one_line_exit_2(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not a program\n")
    folder = f"error: CMD: {str(tmp_path)!r} is a directory; give a Python program"  # was "cannot run ... (Permission"
    script = tmp_path / "ok.py"  # run as a program, not found on PATH: "'ok.py' not found"
    script.write_text("print('hi')\n")
    python = f"error: CMD: {str(script)!r} is a Python file, not a program to run; watch it with rightsize diagnose -- "
    empty = "error: CMD: give the command to watch after --"  # '' had read "cannot run '' (Permission denied)"
    for cmd, start in ((str(text), "error: CMD: cannot run "), (str(tmp_path), folder), (str(script), python),
                       ("", empty)):  # fmt: skip
        run = subprocess.run([sys.executable, "-m", "rightsize", "diagnose", "--", cmd], capture_output=True,
                             text=True, timeout=60)  # fmt: skip
        assert run.returncode == 2 and run.stderr.startswith(start), run.stderr
        assert run.stderr.count("\n") == 1


@pytest.mark.slow
def test_healthy_loop_has_no_input_problem() -> None:
    report = _cli("healthy")
    assert report["facts"]["steps"] == 144 and report["facts"]["data_wait_fraction"] < 0.2
    assert all(f["check"] != "input pipeline" for f in report["findings"])
    # no problem but, on a loaded machine, the one that says so (other work held the cores)
    assert all(f["severity"] != "problem" or f["check"] == "CPU contention" for f in report["findings"]), report


def test_context_manager_watches_a_notebook_loop() -> None:
    model = nn.Linear(8, 2)
    opt = torch.optim.AdamW(model.parameters())
    loader = DataLoader(TensorDataset(torch.randn(40, 8), torch.randint(0, 2, (40,))), batch_size=4)
    with rightsize.diagnose.watch() as w:
        for x, y in loader:
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            opt.zero_grad()
    assert (w.facts.batches, w.facts.steps) == (10, 10)
    assert w.facts.loaders[0].batch_size == 4
    # a 4-sample batch of an 8x2 model: either too small a batch or (loader overhead) a waiting loop
    assert any(f.check in ("batch size", "input pipeline") for f in w.findings)
    assert "fix:" in w.report()
    before = torch.utils.data.dataloader._BaseDataLoaderIter.__next__
    with rightsize.diagnose.watch():
        pass
    assert torch.utils.data.dataloader._BaseDataLoaderIter.__next__ is before  # patches undone


class _SlowSamples(torch.utils.data.Dataset):  # type: ignore[type-arg]
    def __len__(self) -> int:
        return 20

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        time.sleep(0.015)  # a slow decode
        return torch.randn(8), i % 2


@pytest.mark.slow  # > 1.3 s: make test runs it, make test-fast skips it
def test_setup_before_the_loop_does_not_dilute_a_starving_loader() -> None:
    """The share is of the loop's time (first batch to last step), not of everything inside the watch."""
    model = nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    nn.functional.cross_entropy(model(torch.randn(4, 8)), torch.zeros(4, dtype=torch.long)).backward()
    opt.step()  # autograd's and the optimiser's first-call set-up, outside the watch (CI read it as compute)
    opt.zero_grad()
    with rightsize.diagnose.watch() as w:
        time.sleep(1.0)  # the script's setup: imports, building the model, reading an index
        for x, y in DataLoader(_SlowSamples(), batch_size=4):
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            opt.zero_grad()
    f = w.facts
    assert f.wall_s > 1.0 > f.loop_s > 0.29  # 5 batches x 4 samples x 15 ms of waiting
    assert f.data_wait_fraction > 0.6  # of the wall time it would read about 0.25, near the 20% threshold
    assert any(x.check == "input pipeline" and x.severity == "problem" for x in w.findings)


@pytest.mark.slow
def test_cores_busy_is_measured_over_the_loop_too() -> None:
    """Idle setup, then a loop that keeps a core busy: the loop's cores-busy reads ~1, the whole watch's far less."""
    x = torch.randn(256, 256)
    loader = DataLoader(TensorDataset(torch.randn(40, 8)), batch_size=4)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with rightsize.diagnose.watch() as w:
            time.sleep(0.6)  # setup that waits (downloading, reading an index)
            for _ in range(3):
                for (_b,) in loader:
                    t = time.perf_counter()
                    while time.perf_counter() - t < 0.02:
                        _ = x @ x  # compute on the one core
    finally:
        torch.set_num_threads(threads)
    f = w.facts
    assert f.loop_s > 0.5 and f.cpu_cores_busy > 0.4  # one core, most of the loop (half of it on a machine run 2x over)
    assert f.cpu_s / f.wall_s < 0.75 * f.cpu_cores_busy  # what the whole watch would have said


class _SpinningDataset(torch.utils.data.Dataset[torch.Tensor]):
    """Each item costs 20 ms of CPU in the loader worker that makes it."""

    def __len__(self) -> int:
        return 40

    def __getitem__(self, i: int) -> torch.Tensor:
        t = time.process_time()
        while time.process_time() - t < 0.02:
            pass
        return torch.zeros(8)


@pytest.mark.slow
def test_cores_busy_counts_the_loader_workers_while_they_run() -> None:
    """A loop whose persistent DataLoader worker does the CPU work: the worker's core counts while it is alive (it had
    counted only once the worker exited, after the watch: 0.0 cores busy, 'raise the batch size')."""
    loader = DataLoader(_SpinningDataset(), batch_size=4, num_workers=1, persistent_workers=True)
    with rightsize.diagnose.watch() as w:
        for _ in range(2):
            for _b in loader:
                pass
    f = w.facts
    del loader  # the worker exits after the watch
    # 80 items x 20 ms of the worker's CPU fall inside the loop however loaded the machine is (it read ~0.25 s)
    assert f.loop_cpu_s > 1.2, f
    assert f.cpu_cores_busy > 0.9 * f.loop_cpu_s / f.loop_s, f


def test_rules_on_gpu_facts() -> None:
    facts = LoopFacts(wall_s=10, data_wait_s=0.5, batches=100, steps=100, cpu_s=10, logical_cores=8,
                      device="cuda", cuda_peak_bytes=int(0.95 * 16 * 2**30), cuda_total_bytes=16 * 2**30,
                      loaders=[LoaderInfo(4, False, 32)], h2d_copies=2000, h2d_bytes=2**30)  # fmt: skip
    checks = {(f.check, f.severity) for f in diagnose(facts)}
    assert ("memory headroom", "problem") in checks and ("mixed precision", "advice") in checks
    assert ("host-to-device copies", "advice") in checks
    assert diagnose(LoopFacts())[0].severity == "problem"  # nothing seen: say how to make it see
    small = LoopFacts(wall_s=10, data_wait_s=0.1, batches=100, cpu_s=19, logical_cores=2,
                      loaders=[LoaderInfo(2, False, 4)])  # fmt: skip
    assert [f.check for f in diagnose(small)] == ["batch size"]


def test_a_loop_of_milliseconds_gets_no_starving_or_cpu_verdict() -> None:
    """16 batches in 10 ms: its waits are start-up, its CPU share is between two of the sampler's readings."""
    blip = LoopFacts(wall_s=0.03, loop_s=0.01, data_wait_s=0.0043, batches=16, cpu_s=0.02, loop_cpu_s=0.031,
                     logical_cores=2, loaders=[LoaderInfo(0, False, 64)])  # fmt: skip
    assert blip.cpu_cores_busy <= 2.0  # the window's 3.1 cores fall back to the watch's, capped at the machine
    findings = diagnose(blip)
    assert [(f.check, f.severity) for f in findings] == [("loop", "advice")]
    assert "too short to judge" in findings[0].evidence and "10 ms" in findings[0].evidence
    longer = LoopFacts(wall_s=2, loop_s=0.5, data_wait_s=0.3, batches=16, cpu_s=0.2, loop_cpu_s=0.1,
                       logical_cores=2, loaders=[LoaderInfo(0, False, 64)])  # fmt: skip
    assert diagnose(longer)[0].check == "input pipeline"  # half a second of starving is judged


def test_a_starved_loop_whose_workers_fill_the_cores_is_not_told_to_add_the_ones_it_has() -> None:
    """num_workers=2 on 2 cores, starving: it said 'DataLoader(num_workers=2, ...)', the setting already in use."""
    facts = LoopFacts(wall_s=4, loop_s=4, data_wait_s=0.9 * 4, batches=40, steps=40, cpu_s=7.6, loop_cpu_s=7.6,
                      logical_cores=2, loaders=[LoaderInfo(2, False, 32)])  # fmt: skip  # 1.9 cores busy
    first = diagnose(facts)[0]
    assert first.check == "input pipeline" and "num_workers=2" in first.evidence
    assert first.fix.startswith("its 2 loader workers already fill the 2 cores: more would only take turns; make each "
                                "item cheaper: decode and augment ahead of time")  # fmt: skip
    assert first.fix.endswith("a bigger instance will not help unless it has more cores")
    assert "num_workers=" not in first.fix
    fewer = LoopFacts(wall_s=4, loop_s=4, data_wait_s=3.6, batches=40, steps=40, cpu_s=2, loop_cpu_s=2,
                      logical_cores=8, loaders=[LoaderInfo(2, False, 32)])  # fmt: skip
    assert diagnose(fewer)[0].fix.startswith("load data in parallel: DataLoader(num_workers=4, ")


def test_a_contended_loop_is_said_so_and_gets_no_cpu_advice() -> None:
    """Other work holding the cores had read as this loop's own idle cores: 'run k worker processes x t threads —
    or pick a smaller instance', on a machine at load 7 of 2 cores."""
    facts = LoopFacts(wall_s=16, loop_s=15.9, data_wait_s=0.1, batches=50, cpu_s=8, loop_cpu_s=8, logical_cores=2,
                      torch_threads=2, sched_run_s=8.0, sched_wait_s=12.0, load_average=6.8, others_share=0.72,
                      loaders=[LoaderInfo(0, False, 64)])  # fmt: skip
    findings = diagnose(facts)
    assert [(x.check, x.severity) for x in findings] == [("CPU contention", "problem")], findings
    assert "waited for a CPU 60% of the time" in findings[0].evidence
    assert "(other processes kept 72% of its cores busy; load average 6.8 on 2 cores)" in findings[0].evidence
    quiet = LoopFacts(**{**facts.__dict__, "sched_wait_s": 0.1})
    assert [x.check for x in diagnose(quiet)] == ["CPU utilization"]  # the advice stands on a quiet machine
    # waiting on its own loader workers and threads (nobody else busy): not contention by other work
    itself = LoopFacts(**{**facts.__dict__, "others_share": 0.05})
    assert "CPU contention" not in [x.check for x in diagnose(itself)]
    assert LoopFacts.from_dict(facts.to_dict()).contention == pytest.approx(0.6)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/schedstat").exists(), reason="needs schedstat")
def test_the_probe_measures_its_threads_waiting_beside_cpu_hogs() -> None:
    """Two busy processes a core, not this process's children (other work: the probe counts its children's CPU as
    the program's own), beside a loop."""
    import os
    import signal

    n = 2 * (os.cpu_count() or 1)
    hog = "import time\nt = time.time()\nwhile time.time() - t < 30: pass"  # gone in 30 s if left behind
    started = subprocess.run(
        ["sh", "-c", f"for i in $(seq {n}); do {sys.executable} -c '{hog}' >/dev/null 2>&1 & echo $!; done"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    pids = [int(p) for p in started.stdout.split()]
    x = torch.randn(128, 128)
    loader = DataLoader(TensorDataset(torch.randn(400, 8)), batch_size=4)
    try:
        with rightsize.diagnose.watch() as w:
            t = time.perf_counter()
            while time.perf_counter() - t < 1.5:
                for (_b,) in loader:
                    _ = x @ x
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    f = w.facts
    assert f.contention is not None and f.contention > 0.3, f  # 2 hogs a core: about 2/3 of its time waiting
    assert any(x.check == "CPU contention" for x in w.findings), (f, w.findings)


def test_starved_workers_that_leave_the_cores_idle_are_told_to_add_workers() -> None:
    """2 loader workers sleeping in __getitem__ (I/O) on 2 cores, 0.56 cores busy: it said they 'already fill the 2
    cores: more would only take turns', where more workers overlap the waits."""
    facts = LoopFacts(wall_s=4, loop_s=4, data_wait_s=0.56 * 4, batches=40, steps=40, cpu_s=2.24, loop_cpu_s=2.24,
                      logical_cores=2, loaders=[LoaderInfo(2, False, 32)])  # fmt: skip
    first = diagnose(facts)[0]
    assert first.check == "input pipeline"
    assert first.fix.startswith(
        "its 2 loader workers keep only 0.6 of 2 cores busy: they wait (disk, network), so "
        "more of them overlap the waits; load data in parallel: DataLoader(num_workers=4, "
    )
    crowded = LoopFacts(**{**facts.__dict__, "others_share": 0.9})  # idle for want of a CPU: not told to add workers
    assert diagnose(crowded)[0].fix.startswith("its 2 loader workers already fill the 2 cores")
