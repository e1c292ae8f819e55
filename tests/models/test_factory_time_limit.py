"""A factory whose import or call never returns ends in a one-line SpecError after RIGHTSIZE_FACTORY_TIMEOUT_S;
the timer and the SIGALRM handler that were there before are back afterwards."""

from __future__ import annotations

import signal
import textwrap
import threading
import time
from pathlib import Path

import pytest
import torch

from rightsize.errors import SpecError
from rightsize.models import resolve_model
from rightsize.models.time_limit import (
    DEFAULT_FACTORY_TIMEOUT_S,
    FACTORY_TIMEOUT_ENV,
    TimeLimitExceeded,
    factory_timeout_s,
    time_limit,
)


def _write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, body: str) -> None:
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(body))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(FACTORY_TIMEOUT_ENV, "0.5")


@pytest.mark.slow  # ~1 s on 2 cores: kept out of make test-fast
def test_a_factory_that_never_returns_is_stopped_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write(tmp_path, monkeypatch, "sleepy_factory_mod", """
        import time
        def build():
            try:  # a retry loop that swallows its errors does not swallow the limit
                time.sleep(60)
            except Exception:
                pass
        def spin():
            while True:
                pass
    """)  # fmt: skip
    handler, (delay, _) = signal.getsignal(signal.SIGALRM), signal.getitimer(signal.ITIMER_REAL)
    for attr in ("build", "spin"):
        entry = resolve_model(f"sleepy_factory_mod:{attr}", [4])
        started = time.monotonic()
        with pytest.raises(SpecError, match=rf"^model: sleepy_factory_mod:{attr}\(\) has not returned after 0\.5 s; "
                           rf"a factory must build and return the torch\.nn\.Module .*, or allow more with "
                           rf"{FACTORY_TIMEOUT_ENV}=SECONDS$"):  # fmt: skip
            entry.build()
        assert time.monotonic() - started < 15  # its sleep is 60 s
    assert signal.getsignal(signal.SIGALRM) is handler  # pytest-timeout's own, when it runs with signals
    left, _ = signal.getitimer(signal.ITIMER_REAL)
    assert (left > 0) == (delay > 0) and left <= delay  # its timer re-armed for what is left of it


def test_a_factory_module_whose_import_never_ends_is_stopped_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    _write(tmp_path, monkeypatch, "sleepy_import_mod", "import time\ntime.sleep(60)\ndef build():\n    return None\n")
    started = time.monotonic()
    with pytest.raises(SpecError, match=r"^model: importing 'sleepy_import_mod' has not finished after 0\.5 s; .*"
                       rf"blocking call at module level\), or allow more with "
                       rf"{FACTORY_TIMEOUT_ENV}=SECONDS$"):  # fmt: skip
        resolve_model("sleepy_import_mod:build", [4])
    assert time.monotonic() - started < 15  # its sleep is 60 s
    assert "sleepy_import_mod" not in sys.modules  # no half-imported module left for the next try


def test_a_factory_that_returns_is_unaffected_and_leaves_no_timer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(
        tmp_path, monkeypatch, "prompt_factory_mod", "from torch import nn\ndef build():\n    return nn.Linear(4, 2)\n"
    )
    monkeypatch.setenv(FACTORY_TIMEOUT_ENV, "5")
    handler, (delay, _) = signal.getsignal(signal.SIGALRM), signal.getitimer(signal.ITIMER_REAL)
    entry = resolve_model("prompt_factory_mod:build", [4])
    assert entry.build()(torch.randn(2, 4)).shape == (2, 2)
    assert entry.count_params() == 4 * 2 + 2  # the meta-device build goes through the same limit
    assert signal.getsignal(signal.SIGALRM) is handler
    left, _ = signal.getitimer(signal.ITIMER_REAL)
    assert (left > 0) == (delay > 0) and left <= delay
    time.sleep(0.1)  # no stray alarm fires after the limit is gone


def test_the_limit_restores_a_previous_handler_and_timer_and_yields_to_a_sooner_one() -> None:
    fired: list[int] = []
    old = signal.signal(signal.SIGALRM, lambda signum, frame: fired.append(signum))
    old_delay, old_interval = signal.getitimer(signal.ITIMER_REAL)
    try:
        signal.setitimer(signal.ITIMER_REAL, 30)
        with time_limit(1) as armed:
            assert armed and 0 < signal.getitimer(signal.ITIMER_REAL)[0] <= 1
        assert 29 < signal.getitimer(signal.ITIMER_REAL)[0] <= 30 and not fired  # the earlier timer, re-armed
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        with time_limit(5) as armed:  # an earlier timer that ends first stands: it is not ours to replace
            assert not armed
            time.sleep(0.4)
        assert fired == [signal.SIGALRM]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        if old_delay:
            signal.setitimer(signal.ITIMER_REAL, old_delay, old_interval)


def test_off_the_main_thread_the_body_runs_without_a_limit() -> None:
    seen: list[bool] = []

    def body() -> None:
        with time_limit(0.01) as armed:
            time.sleep(0.05)
            seen.append(armed)

    worker = threading.Thread(target=body)
    worker.start()
    worker.join(5)
    assert seen == [False]


def test_the_timeout_variable_is_read_and_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(FACTORY_TIMEOUT_ENV, raising=False)
    assert factory_timeout_s() == DEFAULT_FACTORY_TIMEOUT_S
    monkeypatch.setenv(FACTORY_TIMEOUT_ENV, " 42.5 ")
    assert factory_timeout_s() == 42.5
    for bad in ("soon", "0", "-3", "nan", "inf", "1e9"):
        monkeypatch.setenv(FACTORY_TIMEOUT_ENV, bad)
        with pytest.raises(SpecError, match=rf"^{FACTORY_TIMEOUT_ENV}: .* is not a number of seconds > 0"):
            factory_timeout_s()
    with pytest.raises(TimeLimitExceeded), time_limit(0.05):  # a BaseException: `except Exception` lets it by
        time.sleep(5)
