"""Diagnose a running training or inference loop: data starvation, utilization, memory, batch size.

    with rightsize.diagnose.watch() as probe:     # in a notebook or script
        train_one_epoch(...)
    print(probe.report())                           # the findings, each with a fix

``rightsize diagnose -- python train.py`` watches a command the same way (see ``run``).

``rightsize.diagnose`` is both this package and the README's ``with rs.diagnose() as w:``: the module is callable
(``_CallableModule``), as ``watch()``. A plain function named ``rightsize.diagnose`` could not stay: the import
system binds the subpackage over it on the package whenever ``rightsize.diagnose`` is first imported.
"""

from __future__ import annotations

import inspect
import sys
import types
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from rightsize.diagnose.probe import LoopFacts, LoopProbe
from rightsize.diagnose.rules import Finding, diagnose


class Watch:
    """The handle ``watch()`` yields: ``facts`` and ``findings`` once the block has run."""

    def __init__(self, probe: LoopProbe) -> None:
        self.probe = probe

    @property
    def facts(self) -> LoopFacts:
        return self.probe.facts()

    @property
    def findings(self) -> list[Finding]:
        return diagnose(self.facts)

    def report(self) -> str:
        return render(self.facts, self.findings)


@contextmanager
def watch() -> Iterator[Watch]:
    """Watch the loop run inside the block (DataLoader waits, optimizer steps, CPU, memory)."""
    with LoopProbe() as probe:
        yield Watch(probe)


def render(facts: LoopFacts, findings: list[Finding]) -> str:
    rate = f" ({facts.steps / facts.loop_s:.0f}/s)" if facts.steps and facts.loop_s > 0 else ""  # a step's cost
    lines = [
        f"watched {facts.wall_s:.1f} s: {facts.batches} batches, {facts.steps} optimizer steps{rate}, data wait "
        f"{facts.data_wait_fraction:.0%}, {facts.cpu_cores_busy:.1f} of {facts.logical_cores} cores busy, "
        f"peak {'GPU ' if facts.device == 'cuda' else 'RSS '}"
        f"{((facts.cuda_peak_bytes if facts.device == 'cuda' else facts.peak_rss_bytes) or 0) / 2**30:.2f} GiB"
    ]
    mark = {"problem": "✗", "advice": "•", "ok": "✓"}
    for f in findings:
        lines.append(f"{mark[f.severity]} {f.check}: {f.evidence}")
        lines.append(f"    fix: {f.fix}")
    return "\n".join(lines)


class Watching(AbstractContextManager[Watch]):
    """What ``rs.diagnose()`` returns: a ``with`` block yielding the Watch. Used without one (``w = rs.diagnose();
    w.report()``) it says how, where contextlib's object had raised AttributeError naming its own class."""

    def __init__(self) -> None:
        self._block = watch()

    def __enter__(self) -> Watch:
        return self._block.__enter__()

    def __exit__(self, *exc: object) -> bool | None:
        return self._block.__exit__(*exc)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> object:
        if name in ("report", "facts", "findings", "probe"):
            from rightsize.errors import SpecError

            raise SpecError("diagnose", f"watches the code inside a with block; write `with rs.diagnose() as w:`, "
                            f"run your loop in it, then read w.{name}")  # fmt: skip
        raise AttributeError(name)


class _CallableModule(types.ModuleType):
    """``rightsize.diagnose`` itself: ``rightsize.diagnose()`` (and ``rs.diagnose()``) is ``watch()``."""

    def __call__(self, *args: object, **kwargs: object) -> Watching:
        """``with rs.diagnose() as w: ...`` watches the loop in the block; ``w.report()`` is the checklist."""
        if args or kwargs:  # a TypeError had named _CallableModule.__call__
            from rightsize.errors import SpecError

            raise SpecError("diagnose", "takes no arguments: write `with rs.diagnose() as w:` around your loop")
        return Watching()

    @property
    def __signature__(self) -> inspect.Signature:
        """``()``, as the call takes: ``inspect.signature(rs.diagnose)`` had shown ``(*args, **kwargs)``."""
        return inspect.Signature(return_annotation=Watching)

    @property
    def __annotations__(self) -> dict[str, Any]:  # type: ignore[override]
        """The call's, for ``typing.get_type_hints(rs.diagnose)`` (it reads a module's, which were none)."""
        return {"return": Watching}


sys.modules[__name__].__class__ = _CallableModule

__all__ = ["Finding", "LoopFacts", "LoopProbe", "Watch", "Watching", "diagnose", "render", "watch"]
