"""Serve in a child process: ``running_server_process(config) -> base_url``.

A load generator in the same process as the server shares its GIL and skews both, so benchmarks
(and anything that measures latency) run the server as ``python -m rightsize serve … --port 0 --json``
and read its URL from the JSON line it prints once ready. On exit the child gets SIGINT and drains.
Only CLI-expressible configs travel this way (no Python ``predict`` callables: use a
``package.module:factory`` model with ``sample_shape`` instead).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Iterator
from typing import IO

from rightsize.cpus import pin_process
from rightsize.errors import RunFailedError, SpecError
from rightsize.serve.config import ServerConfig


def config_to_args(config: ServerConfig) -> list[str]:
    """``rightsize serve`` arguments for ``config`` (port 0: a free one)."""
    lanes = config.pools or ()
    if config.predict is not None or any(p.predict is not None or p.device != "cpu" for p in lanes):
        raise SpecError(
            "config", "a Python predict or GPU pools cannot cross a process; use model='pkg.mod:factory' and CPU lanes"
        )
    args = [config.model, "--precision", config.precision, "--max-batch", str(config.max_batch)]
    args += ["--max-wait-ms", repr(config.max_wait_ms), "--queue-size", str(config.queue_size)]
    args += ["--max-queue-batches", repr(config.max_queue_batches), "--read-timeout-s", repr(config.read_timeout_s)]
    args += ["--host", config.host, "--port", str(config.port), "--log-level", config.log_level]
    from rightsize.models.byo import input_kind_of

    kind = input_kind_of(config.model)  # a spec's input holds both sizes; `serve` refuses the one its model ignores
    optional = {
        "--seq": config.seq_len if kind in (None, "tokens") else None,
        "--image": config.image_size if kind in (None, "image") else None,
        "--workers": config.workers,
        "--threads": config.threads,
        "--router": config.router,
        "--crossover": config.crossover_batch,
        "--slo-ms": config.slo_ms,
        "--token": config.token,
    }
    for flag, value in optional.items():
        if value is not None:
            args += [flag, str(value)]
    for p in lanes:
        args += ["--lane", f"{p.name}={p.workers}x{p.threads or 1}" + (f":{p.precision}" if p.precision else "")]
    if config.sample_shape:
        args += ["--shape", ",".join(map(str, config.sample_shape))]
    if config.tiny:
        args.append("--tiny")
    return args


def _read_json(stream: IO[str], out: queue.Queue[object]) -> None:
    """Collect stdout lines until they parse as one JSON object (the ready message)."""
    text = ""
    for line in stream:
        text += line
        try:
            out.put(json.loads(text))
            return
        except json.JSONDecodeError:
            continue
    out.put(None)  # the child closed stdout without a ready message


@contextlib.contextmanager
def running_server_process(
    config: ServerConfig,
    start_timeout_s: float = 180.0,
    env: dict[str, str] | None = None,
    cpus: frozenset[int] | None = None,
) -> Iterator[str]:
    """Run ``rightsize serve`` for ``config`` in a child process (on ``cpus``); yields its base URL once ready.

    With ``cpus`` and no ``config.threads``, each worker gets ``len(cpus) // workers`` intra-op threads
    (the child reads its own affinity).
    """
    cmd = [sys.executable, "-m", "rightsize", "serve", *config_to_args(config), "--json"]
    child_env = os.environ.copy() | (env or {})
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env)
    pin_process(proc.pid, cpus)
    assert proc.stdout is not None and proc.stderr is not None
    ready: queue.Queue[object] = queue.Queue()
    tail: deque[str] = deque(maxlen=20)  # stderr is drained all along so the child never blocks on it
    threading.Thread(target=_read_json, args=(proc.stdout, ready), daemon=True).start()
    threading.Thread(target=tail.extend, args=(proc.stderr,), daemon=True).start()
    try:
        info = ready.get(timeout=start_timeout_s)
    except queue.Empty:
        info = None
    try:
        if not isinstance(info, dict) or "url" not in info:
            proc.kill()
            proc.wait()
            err = "".join(tail)[-600:].strip()
            raise RunFailedError(f"`{' '.join(cmd[1:])}` did not become ready: {err or 'no output'}")
        yield str(info["url"])
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(config.drain_timeout_s + 10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
