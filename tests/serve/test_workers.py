"""CPU pools of k > 1 workers run k worker processes, each with its own model copy and thread count."""

from __future__ import annotations

import os

import httpx
import numpy as np
import pytest

from rightsize.serve import ServerConfig
from rightsize.serve.batcher import ModelError
from rightsize.serve.config import PoolConfig
from rightsize.serve.workers import WorkerProcess, close_runs, cpu_runs, load_model


@pytest.mark.slow  # a few seconds: make test runs it, test-fast does not
def test_a_pool_of_two_workers_runs_two_processes_that_answer_as_the_model_does() -> None:
    """The k x t layout the planner prices: two processes (no GIL shared), the same seeded model in each; a batch's
    error comes back as its own type, and close stops them."""
    config = ServerConfig(model="simplenet", tiny=True, precision="fp32")
    model = load_model(config)
    runs, _ = cpu_runs(PoolConfig("cpu", "cpu", 2, 1), model, "fp32", config)
    try:
        assert len(runs) == 2 and all(isinstance(r, WorkerProcess) for r in runs)
        pids = {r.process.pid for r in runs if isinstance(r, WorkerProcess)}
        assert len(pids) == 2 and os.getpid() not in pids
        x = np.random.default_rng(0).standard_normal((3, *model.spec.sample_shape)).astype(np.float32)
        (here,), _ = cpu_runs(PoolConfig("cpu", "cpu", 1, 1), model, "fp32")
        for run in runs:
            np.testing.assert_allclose(run(x), here(x), rtol=1e-5, atol=1e-6)
        with pytest.raises(RuntimeError):  # a batch the model cannot take: the model's own error type
            runs[0](np.zeros((1, 3), dtype=np.float32))
        assert runs[0](x).shape[0] == 3  # the worker lives on after a failed batch
    finally:
        close_runs(runs)
    assert all(not r.process.is_alive() for r in runs if isinstance(r, WorkerProcess))
    with pytest.raises(ModelError, match="exited"):
        runs[0](x)


@pytest.mark.slow  # > 3 s: make test runs it, make test-fast skips it
def test_the_server_serves_a_two_worker_pool() -> None:
    from rightsize.serve import running_server

    with running_server(ServerConfig(model="simplenet", tiny=True, port=0, workers=2, threads=1)) as url:
        info = httpx.get(f"{url}/v1/info").json()
        shape = info["sample_shape"]
        got = httpx.post(f"{url}/v1/predict", json={"inputs": np.zeros((2, *shape)).tolist()})
    assert [(p["workers"], p["threads"]) for p in info["pools"]] == [(2, 1)]
    assert got.status_code == 200 and len(got.json()["outputs"]) == 2
