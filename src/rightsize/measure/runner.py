"""Run each config in its own child process, so an OOM or crash fails one config, not the sweep.

Children fork from a forkserver that has already imported torch (``set_forkserver_preload``),
so a child starts in tens of milliseconds instead of re-importing torch. ``memory_limit_bytes``
becomes RLIMIT_AS in the child: allocations past it raise, like a smaller machine would.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import resource
import signal
import threading
import time
import traceback
from multiprocessing.connection import Connection
from typing import Any

import psutil

from rightsize.errors import SpecError
from rightsize.measure.config import BenchConfig
from rightsize.models.byo import is_user_ref
from rightsize.models.time_limit import factory_timeout_s, limit_in_this_child
from rightsize.profile import Measurement

# ``Measurement.extra`` key of a config that failed on an error in the spec ([field, problem]): every config would
# fail the same way, so the sweep stops and reports it (``sweep.drive``)
SPEC_ERROR = "spec_error"

# A measuring child's exit status when it started inside rightsize.plan / rightsize.measure: a forkserver child
# imports the parent's script again (as ``__mp_main__``), and a script that calls them outside
# ``if __name__ == "__main__":`` began a sweep of its own there, which waited on the parent's store lock for ever
# while the parent waited for the child. The parent stops the sweep with ``REIMPORTED`` (nothing stored).
REIMPORTED_EXIT = 86
REIMPORTED = ("script", "calls rightsize.plan or rightsize.measure outside `if __name__ == \"__main__\":`, and each "
              "measuring child imports the script again, so the child began a sweep of its own; put the calls under "
              "`if __name__ == \"__main__\":` (README.md, From Python). Notebooks need nothing special")  # fmt: skip

# Importing a transformers modeling module costs seconds; the forkserver pays it once for every child.
_PRELOAD = [
    "torch",
    "rightsize.measure.scenarios",
    "transformers.models.bert.modeling_bert",
    "transformers.models.distilbert.modeling_distilbert",
    "transformers.models.gpt2.modeling_gpt2",
    "transformers.models.resnet.modeling_resnet",
    "transformers.models.mobilenet_v2.modeling_mobilenet_v2",
    "transformers.models.llama.modeling_llama",
]
_CTX: Any = None

_OOM_MARKERS = ("out of memory", "can't allocate memory", "cannot allocate memory", "std::bad_alloc", "memoryerror")


def exit_if_reimported() -> None:
    """In a child that is still starting (importing the parent's script: multiprocessing's own ``_inheriting``, which
    its spawn check reads too), exit with ``REIMPORTED_EXIT`` rather than sweep. A pool worker the user started runs
    its task after the start, and goes on."""
    if getattr(mp.current_process(), "_inheriting", False):
        os._exit(REIMPORTED_EXIT)


def _context() -> Any:
    global _CTX
    if _CTX is None:
        _CTX = forkserver_context(_PRELOAD)
    return _CTX


def forkserver_context(preload: list[str]) -> Any:
    """The forkserver context, its server started now with Ctrl-C ignored: the server protects itself from SIGINT
    only after its preload, so a Ctrl-C in the seconds it spends importing torch printed a KeyboardInterrupt
    traceback from it beside rightsize's one-line "interrupted". An ignored SIGINT survives the server's exec (a
    Python started with SIGINT ignored keeps it so); rightsize's own handler is back before this returns. The
    preload takes effect only if this process's server is not running yet."""
    from multiprocessing import forkserver

    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(preload)
    if threading.current_thread() is not threading.main_thread():  # signal handlers are the main thread's
        return ctx
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        forkserver.ensure_running()
    finally:
        signal.signal(signal.SIGINT, previous)
    return ctx


def classify_failure(exc: BaseException) -> str:
    """A one-line reason; out-of-memory errors are named as such (the planner reads them)."""
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, MemoryError) or any(m in text.lower() for m in _OOM_MARKERS):
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"out of memory: {first[:200]}"
    return text.strip().splitlines()[0][:300]


def _exit_with(pid: int, started: float) -> None:
    """Exit this child when process ``pid`` (rightsize, created at ``started``) is gone: a killed `rightsize bench`
    left its measuring child running for the rest of its config. (The forkserver does not help: every child holds
    its liveness pipe, so it outlives rightsize as long as they do.) Runs in a daemon thread, polling twice a
    second."""
    while True:
        time.sleep(0.5)
        try:
            proc = psutil.Process(pid)
            if proc.create_time() != started or proc.status() == psutil.STATUS_ZOMBIE:
                os._exit(1)
        except psutil.NoSuchProcess:
            os._exit(1)
        except psutil.Error:  # cannot tell: keep measuring
            continue


def _child(
    conn: Connection,
    cfg_dict: dict[str, Any],
    cpus: frozenset[int] | None = None,
    parent: tuple[int, float] | None = None,
) -> None:
    if parent is not None:
        threading.Thread(target=_exit_with, args=parent, daemon=True, name="rightsize-parent-watch").start()
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    if cpus is not None:  # before torch starts its thread pool, so the pool inherits the mask
        os.sched_setaffinity(0, cpus)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and stops us
    limit_in_this_child()  # a user's factory that never returns ends in its own error, not in our kill
    cfg = BenchConfig.from_dict(cfg_dict)
    try:
        if cfg.memory_limit_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (cfg.memory_limit_bytes, cfg.memory_limit_bytes))
        from rightsize.measure.scenarios import run_config

        result = run_config(cfg)
    except SpecError as exc:  # the spec's fault, not this config's (a factory that raises): the sweep stops on it
        result = cfg.result("failed", reason=str(exc), extra={SPEC_ERROR: [exc.field, exc.problem]})
    except BaseException as exc:
        reason = classify_failure(exc)
        if os.environ.get("RIGHTSIZE_DEBUG"):
            traceback.print_exc()
        result = cfg.result("failed", reason=reason)
    try:
        conn.send(result.to_dict())
    except OSError:  # rightsize is gone (the pipe's reader closed): nobody to tell, nothing to print
        os._exit(1)
    except BaseException as exc:  # the result would not pickle: send why instead
        conn.send(cfg.result("failed", reason=classify_failure(exc)).to_dict())
    conn.close()


def child_time_limit_s(cfg: BenchConfig) -> float:
    """How long a config's child may run before it is killed: 300 s beyond its timing budget, and a user's model
    the factory's own limit on top (``RIGHTSIZE_FACTORY_TIMEOUT_S``), so that limit ends a hanging factory first,
    with an error that names it."""
    return cfg.timing.max_time_s * 4 + 300 + (factory_timeout_s() if is_user_ref(cfg.model) else 0)


def run_isolated(cfg: BenchConfig, timeout_s: float | None = None, cpus: frozenset[int] | None = None) -> Measurement:
    """Run one config in a fresh child (on ``cpus`` when given); a crash, kill or timeout becomes ``failed``."""
    ctx = _context()
    parent, child = ctx.Pipe(duplex=False)
    me = (os.getpid(), psutil.Process().create_time())
    proc = ctx.Process(target=_child, args=(child, cfg.to_dict(), cpus, me), daemon=True)
    proc.start()
    child.close()
    limit = timeout_s if timeout_s is not None else child_time_limit_s(cfg)
    try:
        if parent.poll(limit):
            try:
                return Measurement.from_dict(parent.recv())
            except EOFError:
                pass  # the child died while sending; report below
        else:
            proc.kill()
            proc.join()
            return cfg.result("failed", reason=f"timed out after {limit:.0f} s")
        proc.join(timeout=10)
        code = proc.exitcode
        if code == REIMPORTED_EXIT:  # not this config's fault, nor stored: the sweep stops on it (sweep.drive)
            return cfg.result("failed", reason=REIMPORTED[1], extra={SPEC_ERROR: list(REIMPORTED)})
        if code is not None and code < 0:
            name = signal.Signals(-code).name
            hint = " (likely out of memory)" if -code == signal.SIGKILL else ""
            return cfg.result("failed", reason=f"child killed by {name}{hint}")
        return cfg.result("failed", reason=f"child exited with code {code} before reporting")
    except KeyboardInterrupt:
        proc.kill()
        raise
    finally:
        parent.close()
        if proc.is_alive():
            proc.kill()
        proc.join(timeout=5)
