"""The CLI end to end: ``rightsize serve`` in a child process, ready JSON, a prediction, SIGINT drains."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from rightsize.errors import RunFailedError
from rightsize.serve import ServerConfig
from rightsize.serve.process import running_server_process


@pytest.mark.slow
def test_cli_server_in_a_child_process() -> None:
    config = ServerConfig(model="distilbert", tiny=True, seq_len=8, port=0, max_batch=4, token="tok")
    with running_server_process(config) as url:
        info = httpx.get(f"{url}/v1/info").json()
        assert info["sample_shape"] == [8] and info["dtype"] == "int64" and info["max_value"] == 1000
        auth = {"authorization": "Bearer tok"}
        r = httpx.post(f"{url}/v1/predict", json={"inputs": [[1, 2, 3, 4, 5, 6, 7, 8]] * 2}, headers=auth)
        assert r.status_code == 200 and len(r.json()["outputs"]) == 2
        bad = httpx.post(f"{url}/v1/predict", json={"inputs": [[1000] * 8]}, headers=auth)  # id >= vocab
        assert bad.status_code == 422


@pytest.mark.slow  # > 1.9 s: make test runs it, make test-fast skips it
def test_bad_model_fails_fast_with_the_cli_message() -> None:
    with pytest.raises(RunFailedError, match="not in the zoo"), running_server_process(ServerConfig(model="nosuch")):
        pass


@pytest.mark.slow  # builds the full DistilBERT (~3 s)
def test_a_sequence_past_the_position_table_is_bad_input_in_one_line() -> None:
    # DistilBERT holds 512 positions: --seq 600 is the user's input to fix. Before: exit 1 after uvicorn's traceback.
    cmd = [sys.executable, "-m", "rightsize", "serve", "distilbert", "--seq", "600", "--port", "0"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    errors = [line for line in run.stderr.splitlines() if line.startswith(("error", "ERROR"))]
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert errors == [errors[0]] and errors[0].startswith("error: seq: distilbert cannot run 600 tokens")
    assert "position table" in errors[0]


FIXED_BATCH = """
import torch

class Fixed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(16, 4)

    def forward(self, x):
        if x.shape[0] != 1:
            raise ValueError(f"only batch 1 supported, got {x.shape[0]}")
        return self.l(x)

def make():
    return Fixed()

def scalar():
    return torch.nn.Sequential(torch.nn.Linear(16, 4), torch.nn.Flatten(0))
"""


@pytest.mark.slow  # two servers' start-ups in child processes
def test_a_model_failing_its_warm_up_is_one_line_naming_the_fix(tmp_path: Path) -> None:
    """A model that runs batch 1 only, and one whose output is not a row per sample: uvicorn's traceback, exit 1."""
    (tmp_path / "fixed.py").write_text(FIXED_BATCH)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    for ref, start in (("fixed:make", "error: --max-batch: fixed:make failed its warm-up batch of 8 samples "
                                      "(ValueError: only batch 1 supported, got 8) and ran batch 1"),
                       ("fixed:scalar", "error: model: fixed:scalar failed its warm-up batch of 1 (ModelError: model "
                                        "returned (4,) for a batch of 1")):  # fmt: skip
        cmd = [sys.executable, "-m", "rightsize", "serve", ref, "--shape", "16", "--port", "0"]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
        assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr[-800:]
        errors = [line for line in run.stderr.splitlines() if line.startswith(("error", "ERROR"))]
        assert errors == [errors[0]] and errors[0].startswith(start), run.stderr[-800:]


@pytest.mark.slow
def test_two_cpu_lanes_split_requests_by_size_without_a_gpu() -> None:
    """`--lane` x2 + `--router size`: the seeds' hybrid fleet on a CPU-only machine (small and large lanes)."""
    from rightsize.serve.config import PoolConfig

    lanes = (PoolConfig("small", "cpu", 1, 1), PoolConfig("large", "cpu", 1, 1, precision="int8"))
    config = ServerConfig(model="mobilenet_v2", tiny=True, port=0, max_batch=8, max_wait_ms=0.0, router="size",
                          crossover_batch=4, pools=lanes)  # fmt: skip
    with running_server_process(config) as url:
        info = httpx.get(f"{url}/v1/info").json()
        assert [(p["name"], p["precision"]) for p in info["pools"]] == [("small", "fp32"), ("large", "int8")]
        assert info["router"] == "size"
        shape = info["sample_shape"]

        def body(n: int) -> dict[str, object]:
            import numpy as np

            return {"inputs": np.zeros((n, *shape)).tolist()}

        first = httpx.get(f"{url}/v1/batches").json()["next"]  # after the warm-up batches
        for n in (1, 2, 6, 8, 1):
            assert httpx.post(f"{url}/v1/predict", json=body(n), timeout=30).status_code == 200
        rows = httpx.get(f"{url}/v1/batches", params={"since": first}).json()["batches"]
        pool_of = {samples: pool for pool, samples, *_ in rows}
        assert pool_of == {1: "small", 2: "small", 6: "large", 8: "large"}


def test_lane_flags_are_checked() -> None:
    from rightsize.errors import SpecError
    from rightsize.serve.config import parse_lanes

    lanes = parse_lanes(["a=1x1", "b=1x1:int8"], 2)
    assert [(p.name, p.workers, p.threads, p.precision) for p in lanes] == [("a", 1, 1, None), ("b", 1, 1, "int8")]
    for bad, match in ((["a=1"], "NAME=WORKERSxTHREADS"), (["a=0x1"], ">= 1"), (["a=1x1", "a=1x1"], "differ"),
                       (["a=1x2", "b=1x1"], "3 threads"), (["a=1x1:fp64"], "precision must be")):  # fmt: skip
        with pytest.raises(SpecError, match=match):
            parse_lanes(bad, 2)


@pytest.mark.slow  # starts a server process (~3 s)
@pytest.mark.parametrize(("sig", "rc"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_stopped_server_says_so_without_a_traceback(sig: str, rc: int) -> None:
    """uvicorn re-raised the signal inside the event loop: SIGTERM logged starlette's CancelledError traceback, and
    Ctrl-C ended silently."""
    import signal

    from serve_helpers import start_ready

    proc, ready = start_ready(["simplenet", "--tiny"])
    try:
        assert httpx.get(f"{ready['url']}/v1/info").status_code == 200
        proc.send_signal(getattr(signal, sig))
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == rc and "Traceback" not in err, err
    assert "stopped: requests in flight were answered" in err
