"""Config checks and pool resolution: bad input names the flag and the fix."""

from __future__ import annotations

import pytest

from rightsize.errors import SpecError, UnsupportedError
from rightsize.serve import PoolConfig, ServerConfig
from rightsize.serve.config import resolve_pools, resolve_router, split_threads
from rightsize.serve.process import config_to_args


def test_split_threads_keeps_workers_times_threads_within_cores() -> None:
    assert split_threads(8, None, None) == (1, 8)  # one process on every core unless workers are asked for
    assert split_threads(2, None, None) == (1, 2)
    assert split_threads(1, None, None) == (1, 1)
    assert split_threads(8, 3, None) == (3, 2)
    with pytest.raises(SpecError, match=r"--threads.*use --threads 1"):
        split_threads(2, 2, 4)
    with pytest.raises(SpecError, match=r"--workers: 3 worker processes exceed the 2 cores here"):
        split_threads(2, 3, None)  # it had served 3 x 1 on 2 cores


@pytest.mark.parametrize(
    ("kwargs", "flag"),
    [
        ({"precision": "fp8"}, "--precision"),
        ({"router": "random"}, "--router"),
        ({"max_batch": 0}, "--max-batch"),
        ({"max_wait_ms": -1.0}, "--max-wait-ms"),
        ({"queue_size": 4, "max_batch": 8}, "--queue-size"),
        ({"port": 70000}, "--port"),
        ({"slo_ms": 0.0}, "--slo-ms"),
    ],
)
def test_invalid_config_names_the_flag(kwargs: dict[str, object], flag: str) -> None:
    with pytest.raises(SpecError, match=flag):
        ServerConfig(**kwargs)  # type: ignore[arg-type]


def test_pools_follow_router_and_machine() -> None:
    cfg = ServerConfig(workers=2, threads=1)
    assert resolve_router(cfg, has_cuda=False) == "cpu"
    assert resolve_router(cfg, has_cuda=True) == "hybrid"
    (cpu,) = resolve_pools(cfg, has_cuda=False, cores=2)
    assert (cpu.name, cpu.device, cpu.workers, cpu.threads) == ("cpu", "cpu", 2, 1)
    cpu, gpu = resolve_pools(cfg, has_cuda=True, cores=2)
    assert (gpu.name, gpu.device, gpu.workers) == ("gpu", "cuda", 2)  # two batches in flight
    with pytest.raises(UnsupportedError, match=r"--router cpu$"):
        resolve_pools(ServerConfig(router="gpu"), has_cuda=False, cores=2)
    with pytest.raises(UnsupportedError, match=r"use --router cpu \(or --router size with two CPU lanes: --lane small"):
        resolve_pools(ServerConfig(router="size"), has_cuda=False, cores=2)  # the no-GPU way docs/serving.md gives
    with pytest.raises(SpecError, match="two pools"):
        resolve_pools(ServerConfig(router="hybrid", pools=(PoolConfig("a"),)), has_cuda=False, cores=2)


def test_config_to_args_round_trips_the_cli_flags() -> None:
    args = config_to_args(ServerConfig(model="bert-base", tiny=True, seq_len=32, max_batch=4, slo_ms=80.0, token="t"))
    assert args[0] == "bert-base" and "--tiny" in args
    assert args[args.index("--seq") + 1] == "32" and args[args.index("--slo-ms") + 1] == "80.0"
    with pytest.raises(SpecError):
        config_to_args(ServerConfig(predict=lambda x: x, sample_shape=(2,)))


def test_the_read_timeout_is_a_serve_flag_and_crosses_a_process(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """ServerConfig.read_timeout_s had no `rightsize serve` flag (its own error named "--read-timeout-s"), and a
    config run in a process (config_to_args) served the default 10 s instead."""
    from cli_kit import run_cli

    import rightsize.serve.server as server

    args = config_to_args(ServerConfig(model="simplenet", tiny=True, read_timeout_s=30.0))
    assert args[args.index("--read-timeout-s") + 1] == "30.0"
    served: list[ServerConfig] = []
    monkeypatch.setattr(server, "serve", lambda config, on_ready: served.append(config))
    code, _, err = run_cli(["serve", "simplenet", "--tiny", "--read-timeout-s", "2.5"], capsys)
    assert code == 0 and served[0].read_timeout_s == 2.5, err
    code, _, err = run_cli(["serve", "simplenet", "--tiny"], capsys)
    assert code == 0 and served[1].read_timeout_s == 10.0, err
    code, _, err = run_cli(["serve", "simplenet", "--tiny", "--read-timeout-s", "0"], capsys)
    assert code == 2 and "--read-timeout-s" in err
