"""The profile the planner needs: from the store when present, else a quick local sweep."""

from __future__ import annotations

import sys

from rightsize.errors import print_stop
from rightsize.measure.config import input_of
from rightsize.measure.env import fingerprint
from rightsize.measure.sweep import Progress, SweepResult, run_sweep
from rightsize.models import workload_model
from rightsize.profile import Environment, Profile
from rightsize.spec import Workload
from rightsize.store import Store


def ensure_profile(
    workload: Workload, store: Store, progress: bool = True, on_progress: Progress | None = None
) -> Profile:
    """Stored profile of this model/mode/input on this machine, measuring what is missing first.

    The whole stored profile, the spec's configs and any other stored for the same model and input (more points
    for the curves the planner draws); ``spec_profile`` is the spec's configs alone. The sweep reuses every config
    already stored, so a second call measures nothing. A sweep stopped by Ctrl-C raises KeyboardInterrupt once its
    finished configs are stored: planning from the few measured before the stop answered as if the sweep were whole.
    """
    env = fingerprint()
    inp = input_of(workload, workload_model(workload).kind)
    if env.torch is None:  # a core install (no torch) plans from what is stored, measured elsewhere
        return stored_profile(workload, store, inp, env)
    sweep_here(workload, store, env, progress, on_progress)
    profile = store.profile(workload.model, workload.mode, inp, env.id, tiny=workload.tiny)
    if profile is None:
        return Profile(workload.model, workload.mode, inp, env, ())
    return profile


def spec_profile(workload: Workload, store: Store, progress: bool = True) -> Profile:
    """This machine's measurements of exactly the spec's configs (its devices, precisions, batch sizes and threads),
    as ``bench`` tabulates them: the sweep's own result, not the store's whole profile of the model and input,
    which also holds configs other specs measured. Without torch: the stored profile ``ensure_profile`` plans from."""
    env = fingerprint()
    inp = input_of(workload, workload_model(workload).kind)
    if env.torch is None:
        return stored_profile(workload, store, inp, env)
    swept = sweep_here(workload, store, env, progress, None)
    return Profile(workload.model, workload.mode, inp, env, tuple(swept.measurements))


def sweep_here(
    workload: Workload, store: Store, env: Environment, progress: bool, on_progress: Progress | None
) -> SweepResult:
    """The spec's sweep on this machine, its notes printed; KeyboardInterrupt once a stopped sweep is stored."""
    if on_progress is None and progress:
        from rightsize.measure.progress import config_count, sweep_progress

        with sweep_progress(config_count(workload), name=workload.model) as cb:
            swept = run_sweep(workload, store, env=env, on_progress=cb)
            if swept.interrupted:
                cb.stop()
    else:
        swept = run_sweep(workload, store, env=env, on_progress=on_progress)
    # every note of the sweep, as bench prints them: a plan from timings kept while the machine was busy says so where
    # it starts; one that plans from batch 1 alone says batch 2 failed, and which thread counts were skipped
    for note in swept.notes:
        print(f"note: {note}", file=sys.stderr)
    if swept.interrupted:
        new = len(swept.measurements) - swept.reused  # as bench counts them: "stored" was said of none, too
        done = f"{new} config(s) measured before the stop are stored" if new else "no config finished: none stored"
        print_stop(f"interrupted: {done}; nothing was planned (run it again to measure the rest)")
        raise KeyboardInterrupt
    return swept


# Fields of the environment fingerprint that describe the hardware (not the software stack).
_HARDWARE_KEYS = ("cpu_model", "machine", "physical_cores", "logical_cores", "isa", "ram_bytes")


def stored_profiles(workload: Workload, store: Store, inp: dict[str, int]) -> list[Profile]:
    """Every stored profile of this model, mode and input with a successful measurement, oldest first (any
    machine: the caller picks)."""
    return [
        p
        for p in store.profiles(workload.model, tiny=workload.tiny)
        if p.mode == workload.mode and p.input == inp and p.ok()
    ]


def stored_profile(workload: Workload, store: Store, inp: dict[str, int], env: Environment) -> Profile:
    """Without torch nothing can be measured: the newest stored profile of this model, mode and input,
    preferring one taken on this hardware (e.g. by a dev venv on the same machine)."""
    from rightsize.errors import UnsupportedError

    stored = stored_profiles(workload, store, inp)
    if not stored:
        raise UnsupportedError(
            f"no stored measurement of {workload.model} ({workload.mode}, {inp}) and measuring needs torch here: "
            "pip install torch==2.13.0, or run `rightsize bench SPEC --store FILE` where torch is installed and "
            "plan with the same --store"
        )
    same_hw = [p for p in stored if all(getattr(p.env, k) == getattr(env, k) for k in _HARDWARE_KEYS)]
    return (same_hw or stored)[-1]  # the store lists profiles in the order they were first measured
