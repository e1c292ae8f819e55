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


def test_the_servers_cpu_counts_its_worker_processes() -> None:
    """`rightsize serve --workers 2` ran the model in 2 worker processes, but rightsize_cpu_utilization and
    /v1/batches' cpu_s read the server process's own CPU time: 0.0108 busy after 20 s of load."""
    import subprocess
    import sys
    import time

    from serve_helpers import metric

    from rightsize.serve.metrics import ServeMetrics

    burn = ("import sys, time\nt = time.process_time()\nwhile time.process_time() - t < 0.5:\n    pass\n"
            "print('done', flush=True)\nsys.stdin.read()\n")  # fmt: skip
    metrics = ServeMetrics(["cpu"], cores=1)
    child = subprocess.Popen([sys.executable, "-c", burn], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        metrics.worker_pids = lambda: [child.pid]
        wall0, own0 = time.perf_counter(), time.process_time()
        metrics.render()  # the scrape the next one counts from
        cpu0 = metrics.cpu_s()
        assert child.stdout is not None and child.stdout.readline() == "done\n"  # it burned 0.5 s of CPU
        cpu1 = metrics.cpu_s()
        text = metrics.render()
        wall, own = time.perf_counter() - wall0, time.process_time() - own0
        assert cpu1 - cpu0 >= own + 0.4  # this process's CPU and the worker's
        assert metric(text, "rightsize_cpu_utilization") >= min(1.0, 0.4 / wall)
    finally:
        child.communicate(timeout=30)  # stdin closed: it ends
    assert metrics.cpu_s() >= cpu1  # an ended worker keeps its last reading


@pytest.mark.slow  # a few seconds of a real two-worker server
def test_a_two_worker_servers_cpu_seconds_include_its_workers() -> None:
    """validate reads cpu_s around a level and takes the model's time × threads out of it: with the workers' CPU
    missing, a --workers 2 server's serving-CPU term was always clamped to 0."""
    import time

    import psutil
    from serve_helpers import metric

    from rightsize.serve import running_server
    from rightsize.serve.config import cpu_cores

    def workers_cpu_s() -> float:
        kids = [p for p in psutil.Process().children() if "spawn_main" in " ".join(p.cmdline())]
        return sum(p.cpu_times().user + p.cpu_times().system for p in kids)

    with running_server(ServerConfig(model="simplenet", tiny=True, port=0, workers=2, threads=1)) as url, \
            httpx.Client(timeout=30) as client:  # fmt: skip
        info = client.get(f"{url}/v1/info").json()
        body = {"inputs": np.random.default_rng(0).standard_normal((info["max_batch"], *info["sample_shape"])).tolist()}
        wall0 = time.perf_counter()
        client.get(f"{url}/metrics")  # the scrape the next one counts from
        own0 = time.process_time()
        cpu0 = float(client.get(f"{url}/v1/batches").json()["cpu_s"])
        workers0 = workers_cpu_s()
        end = time.perf_counter() + 3.0
        while time.perf_counter() < end:
            assert client.post(f"{url}/v1/predict", json=body).status_code == 200
        workers = workers_cpu_s() - workers0
        cpu = float(client.get(f"{url}/v1/batches").json()["cpu_s"]) - cpu0
        util = metric(client.get(f"{url}/metrics").text, "rightsize_cpu_utilization")
        wall, own = time.perf_counter() - wall0, time.process_time() - own0
    assert workers > 0.1, workers  # the model ran in the workers
    assert cpu - own >= 0.8 * workers - 0.03, (cpu, own, workers)  # this (server) process's CPU and the workers'
    # the gauge: this process's CPU (server and client) and the workers', over wall time × cores
    assert util * wall * cpu_cores() >= 0.8 * (own + workers) - 0.05, (util, wall, own, workers)
