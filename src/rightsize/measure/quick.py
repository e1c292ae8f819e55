"""The profile the planner needs: from the store when present, else a quick local sweep."""

from __future__ import annotations

from rightsize.measure.config import input_of
from rightsize.measure.env import fingerprint
from rightsize.measure.sweep import Progress, run_sweep
from rightsize.models import workload_model
from rightsize.profile import Profile
from rightsize.spec import Workload
from rightsize.store import Store


def ensure_profile(
    workload: Workload, store: Store, progress: bool = True, on_progress: Progress | None = None
) -> Profile:
    """Stored profile of this model/mode/input on this machine, measuring what is missing first.

    The sweep reuses every config already stored, so a second call measures nothing.
    """
    entry = workload_model(workload)
    env = fingerprint()
    inp = input_of(workload, entry.kind)
    if on_progress is None and progress:
        from rightsize.cli._progress import sweep_progress

        with sweep_progress(workload) as cb:
            run_sweep(workload, store, env=env, on_progress=cb)
    else:
        run_sweep(workload, store, env=env, on_progress=on_progress)
    profile = store.profile(workload.model, workload.mode, inp, env["id"], tiny=workload.tiny)
    if profile is None:
        return Profile(workload.model, workload.mode, inp, env, ())
    return profile
