"""A time limit on a user's factory (``package.module:factory``): its module's import and its call each get
``RIGHTSIZE_FACTORY_TIMEOUT_S`` seconds (default ``DEFAULT_FACTORY_TIMEOUT_S``), so a loop or a blocking call in
them ends in a one-line error instead of a hang.

The limit is a SIGALRM timer (``signal.setitimer``): its handler raises ``TimeLimitExceeded`` in the main thread,
which interrupts a pure-Python loop, ``time.sleep`` and a blocking socket call (a single C call that never returns
to Python is not interrupted). Any handler and timer already set are restored afterwards, an earlier timer re-armed
for what is left of it. No limit is set where signals cannot be used or another limit already stands: off the main
thread, in a multiprocessing child (its parent times it: a `serve` worker must load within its start limit) unless
the child asked for it (``limit_in_this_child``: `bench`'s measuring child, whose error names the factory where its
parent's kill could only say the config timed out, and `pipeline`'s local workers; a Ray actor is no multiprocessing
child), when a timer already set ends sooner, or when SIGALRM's handler was not installed from Python. `serve` builds
off its main thread and bounds the wait instead (``serve.service._load``).
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Iterator
from types import FrameType

from rightsize.errors import SpecError
from rightsize.inputfile import short

FACTORY_TIMEOUT_ENV = "RIGHTSIZE_FACTORY_TIMEOUT_S"
# A factory may construct a big model (random init of billions of weights on a CPU takes minutes): five minutes.
DEFAULT_FACTORY_TIMEOUT_S = 300.0
MAX_FACTORY_TIMEOUT_S = 86_400.0  # a day: setitimer refuses sizes past a platform limit


_child_opted_in = False  # ``limit_in_this_child`` was called in this process


def limit_in_this_child() -> None:
    """Let ``time_limit`` set its timer in this multiprocessing child (called in its main thread)."""
    global _child_opted_in
    _child_opted_in = True


class TimeLimitExceeded(BaseException):
    """The limit passed. A BaseException, so that a user's ``except Exception`` (a retry loop) does not swallow it."""


def factory_timeout_s() -> float:
    """The seconds ``RIGHTSIZE_FACTORY_TIMEOUT_S`` gives (unset or empty: the default); a SpecError naming the
    variable when it is not a number of seconds in range."""
    raw = os.environ.get(FACTORY_TIMEOUT_ENV, "").strip()
    if not raw:
        return DEFAULT_FACTORY_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (0 < value <= MAX_FACTORY_TIMEOUT_S):  # NaN fails too
        raise SpecError(FACTORY_TIMEOUT_ENV, f"{short(raw)} is not a number of seconds > 0 and <= "
                        f"{MAX_FACTORY_TIMEOUT_S:g}; set e.g. {FACTORY_TIMEOUT_ENV}=600, or unset it for "
                        f"{DEFAULT_FACTORY_TIMEOUT_S:g} s")  # fmt: skip
    return value


def _can_limit(seconds: float) -> bool:
    """Whether ``time_limit`` may set its timer here (see the module docstring)."""
    if threading.current_thread() is not threading.main_thread():
        return False
    if multiprocessing.parent_process() is not None and not _child_opted_in:
        return False
    if signal.getsignal(signal.SIGALRM) is None:  # a handler set from C: it could not be put back
        return False
    delay, _ = signal.getitimer(signal.ITIMER_REAL)
    return not (0 < delay <= seconds)  # a timer already set that ends first stands, alone


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[bool]:
    """Raise ``TimeLimitExceeded`` in the body once ``seconds`` have passed; yields whether the limit is set (False
    where it cannot be, see the module docstring: the body then runs without one)."""
    if not _can_limit(seconds):
        yield False
        return

    def on_alarm(signum: int, frame: FrameType | None) -> None:
        raise TimeLimitExceeded

    previous_delay, previous_interval = signal.getitimer(signal.ITIMER_REAL)
    previous_handler = signal.signal(signal.SIGALRM, on_alarm)
    started = time.monotonic()
    try:
        signal.setitimer(signal.ITIMER_REAL, seconds)
        yield True
    finally:
        try:
            signal.setitimer(signal.ITIMER_REAL, 0)
        finally:
            signal.signal(signal.SIGALRM, previous_handler)
            if previous_delay > 0:  # an earlier timer (a test's timeout, say): what is left of it, at least a tick
                left = previous_delay - (time.monotonic() - started)
                signal.setitimer(signal.ITIMER_REAL, max(left, 1e-6), previous_interval)


__all__ = [
    "DEFAULT_FACTORY_TIMEOUT_S",
    "FACTORY_TIMEOUT_ENV",
    "TimeLimitExceeded",
    "factory_timeout_s",
    "limit_in_this_child",
    "time_limit",
]
