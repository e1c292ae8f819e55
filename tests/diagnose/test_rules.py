"""The diagnose rules on hand-built LoopFacts (a quiet machine's readings), and the probe facts they rely on."""

from __future__ import annotations

import sys

import pytest
import torch
from torch import nn

import rightsize.diagnose
from rightsize.diagnose import LoopFacts, diagnose, render
from rightsize.diagnose.probe import LoaderInfo
from rightsize.diagnose.run import run_watched


def _loader_loop(wait_s: float, batches: int, batch: int, workers: int = 0) -> LoopFacts:
    """12 s of loop on 2 quiet cores, one step a batch."""
    return LoopFacts(wall_s=14, loop_s=12, data_wait_s=wait_s, batches=batches, steps=batches, cpu_s=8, loop_cpu_s=7,
                     logical_cores=2, torch_threads=2, sched_run_s=7, sched_wait_s=0.1, others_share=0.02,
                     loaders=[LoaderInfo(workers, False, batch)])  # fmt: skip


def test_many_cheap_batches_are_told_to_batch_bigger_not_to_add_workers() -> None:
    # Linear(32,1), batch 16, num_workers=0: 30% waiting, 0.19 ms a batch; 2 workers made it 7x slower
    first = diagnose(_loader_loop(3.63, 18657, 16))[0]
    assert (first.check, first.severity) == ("per-batch overhead", "problem")
    assert first.evidence == ("the loop waited on its DataLoader 30% of the time (3.63 s of the loop's 12.00 s), "
                              "0.19 ms a batch (18657 batches of 16; num_workers=0)")  # fmt: skip
    assert first.fix == ("raise the batch size: DataLoader(batch_size=256) or more (scale the learning rate with it); "
                         "loader workers would not help: each batch costs less than handing it between processes "
                         "(~1 ms)")  # fmt: skip
    assert not any("num_workers=2" in f.fix for f in diagnose(_loader_loop(3.63, 18657, 16)))
    with_workers = diagnose(_loader_loop(3.63, 18657, 16, workers=2))[0]
    assert "its 2 workers add that hand-off to every batch: num_workers=0 may be faster; " in with_workers.fix


def test_a_slow_dataset_is_still_told_to_add_workers() -> None:
    # 4 ms of decoding an item, 32 items a batch: 145 ms a batch of waiting
    first = diagnose(_loader_loop(8.87, 61, 32))[0]
    assert (first.check, first.severity) == ("input pipeline", "problem")
    assert first.fix.startswith("load data in parallel: DataLoader(num_workers=2, persistent_workers=True, ")


def _steps(steps: int, busy: float = 1.0, threads: int = 2, cores: int = 2) -> LoopFacts:
    """A loop without a DataLoader, 12 s of steps, on quiet cores."""
    return LoopFacts(wall_s=14, loop_s=12, steps=steps, cpu_s=busy * 14, loop_cpu_s=busy * 12, logical_cores=cores,
                     torch_threads=threads, sched_run_s=busy * 12, sched_wait_s=0.1, others_share=0.02)  # fmt: skip


def test_tiny_steps_are_per_step_overhead() -> None:
    # 44,146 steps of Linear(32,1) at batch 16 in 12 s: 0.27 ms each; batch 1024 ran 37x the samples a second
    [f] = diagnose(_steps(44146))
    assert (f.check, f.severity) == ("per-step overhead", "problem")
    assert f.evidence == "44146 optimizer steps in 12.00 s: 0.27 ms each (3679/s)"
    assert f.fix.startswith("do more work per step: a bigger batch (scale the learning rate with it), or fewer, ")
    assert diagnose(_steps(480))[0].check == "loop"  # 25 ms a step: compute, no verdict
    assert "optimizer steps (3679/s)," in render(_steps(44146), [f])


def test_one_torch_thread_on_two_cores_is_underused() -> None:
    # torch.set_num_threads(1): one core of 2 busy reads 50%, which the < 50% rule passed as "no bottleneck"
    [f] = diagnose(_steps(104, busy=1.0, threads=1))
    assert (f.check, f.severity) == ("CPU utilization", "advice")
    assert f.evidence == "1.0 of 2 cores busy on average (50%); torch uses 1 thread(s)"
    assert f.fix.startswith("torch.set_num_threads(2): torch runs 1 thread(s) on 2 cores; or run k worker processes")
    [healthy] = diagnose(_steps(104, busy=1.9, threads=2))  # compute on every core
    assert (healthy.check, healthy.evidence) == ("loop", "104 optimizer steps, data wait 0%, 1.9 cores busy")


def test_steady_memory_growth_is_tensors_kept_across_steps() -> None:
    facts = _steps(103, busy=1.9)
    facts.rss_start_bytes, facts.rss_end_bytes = int(0.35 * 2**30), int(0.58 * 2**30)
    [f] = diagnose(facts)
    assert (f.check, f.severity) == ("memory growth", "problem")
    assert (
        f.evidence == "RSS grew from 0.35 GiB to 0.58 GiB over the loop (the mean of its first third to its last third)"
    )
    assert "losses.append(loss.item())" in f.fix
    facts.rss_end_bytes = int(0.42 * 2**30)  # 20%: a warming allocator, not a leak
    assert diagnose(facts)[0].check == "loop"


def test_a_crash_leads() -> None:
    crashed = LoopFacts(wall_s=3, exit_code=1)
    assert [(f.check, f.evidence, f.fix) for f in diagnose(crashed)] == [
        ("program", "the program exited with code 1 before any DataLoader batch or optimizer step",
         "fix the error it printed (above), then diagnose it again")]  # fmt: skip
    mid_run = _steps(104, busy=1.9)
    mid_run.exit_code = 3
    first, *rest = diagnose(mid_run)
    assert (first.check, first.evidence) == ("program", "the program exited with code 3")
    assert first.fix.endswith("the findings below cover only the steps it ran") and rest == []


def test_the_probe_reads_threads_and_its_window_from_a_loop_without_a_loader() -> None:
    model, before = nn.Linear(64, 64), torch.get_num_threads()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    try:
        with rightsize.diagnose.watch() as w:
            torch.set_num_threads(1)  # after the probe started, as a script's own line does
            for _ in range(30):
                model(torch.randn(32, 64)).sum().backward()
                opt.step()
    finally:
        torch.set_num_threads(before)
    assert w.facts.torch_threads == 1 and w.facts.batches == 0 and w.facts.steps == 30
    assert 0 < w.facts.loop_s < w.facts.wall_s  # from the first step to the last, not the whole watch


@pytest.mark.slow  # ~2 s on 2 cores: kept out of make test-fast
def test_a_failed_program_says_so_first() -> None:
    rc, facts, stopped = run_watched([sys.executable, "-c", "import torch; raise SystemExit(3)"], timeout_s=120)
    assert (rc, stopped) == (3, None) and facts is not None and facts.exit_code == 3
    assert diagnose(facts)[0].evidence == "the program exited with code 3 before any DataLoader batch or optimizer step"


def test_rss_trend_is_the_loop_windows_first_and_last_third() -> None:
    from rightsize.diagnose.probe import _rss_trend

    readings = [(float(t), 100 + 10 * t) for t in range(12)]  # t 0..11; the window is 2..10: 9 readings
    assert _rss_trend(readings, 2.0, 10.0) == (130, 190)  # (120+130+140)/3, (180+190+200)/3
    assert _rss_trend(readings, 2.0, 6.0) == (0, 0)  # five readings: too few to tell a trend
