"""Find a stored plan (artifact kind ``plan``) and the measured profile it was planned from, for a report.

Reads the store only. A plan is found by artifact id, by run id (or a 4+ character prefix of either),
or, with no reference, as the newest plan in the store.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rightsize.catalog import Catalog, gpu_memory_tiers
from rightsize.errors import NotFoundError, SpecError
from rightsize.profile import Profile
from rightsize.report.data import ReportData, build_report_data
from rightsize.store import Store

__all__ = ["find_plan", "matching_profile", "stored_report_data"]


def find_generative_plan(store: Store, ref: str | None = None) -> dict[str, Any] | None:
    """The stored generative plan ``ref`` names (its run or artifact id, or a unique 4+ character prefix of one
    that names no other plan), or with no ``ref`` the newest plan when it is generative; else None."""
    generative = store.artifacts(kind="generative-plan")
    if not generative:
        return None
    plans = store.artifacts(kind="plan")
    if ref is None:
        return generative[0] if not plans or generative[0]["created_at"] >= plans[0]["created_at"] else None

    def named(a: dict[str, Any], exact: bool) -> bool:
        ids = (a["id"], a["run_id"] or "")
        return ref in ids if exact else len(ref) >= 4 and any(i.startswith(ref) for i in ids)

    if exact := [a for a in generative if named(a, True)]:
        return exact[0]
    prefixed = [a for a in generative if named(a, False)]
    if len(prefixed) == 1 and not any(named(a, False) for a in plans):
        return prefixed[0]
    return None


def find_plan(store: Store, ref: str | None = None) -> dict[str, Any]:
    """The stored plan artifact ``{"id", "run_id", "kind", "created_at", "payload"}`` for ``ref``."""
    plans = store.artifacts(kind="plan")
    if not plans:
        if generative := store.artifacts(kind="generative-plan"):
            g = generative[0]
            raise NotFoundError(f"run: no plan with run or artifact id {ref!r} in the store {str(store.path)!r}, "
                                f"which holds generative plans only (newest: run {g['run_id'] or g['id']}, "
                                f"{g['payload'].get('name', '?')}); `rightsize results` lists runs")  # fmt: skip
        raise NotFoundError(f"no plan in the store {str(store.path)!r}; run `rightsize plan SPEC` first")
    if ref is None:
        return plans[0]
    exact = [a for a in plans if ref in (a["id"], a["run_id"])]
    if exact:
        return exact[0]
    prefixed = [a for a in plans if len(ref) >= 4 and (a["id"].startswith(ref) or (a["run_id"] or "").startswith(ref))]
    if len(prefixed) == 1:
        return prefixed[0]
    if prefixed:  # never guess between plans: a prefix of one plan's artifact id may be another's run id
        names = ", ".join(
            f"run {a['run_id']} (artifact {a['id']}, {a['payload'].get('name', '?')})" for a in prefixed[:4]
        )
        raise SpecError("run", f"{ref!r} matches {len(prefixed)} plans: {names}; give more characters")
    try:
        other = store.run(ref)
    except NotFoundError:
        other = None
    if other is not None:  # a run of another kind (bench, validate, ...): say what it is
        raise SpecError("run", f"{ref!r} is a {other.kind} run ({other.name or '?'}), not a plan; `rightsize results "
                        f"{other.id}` shows it ({_newest(store, plans)})")  # fmt: skip
    if len(ref) < 4 and any(a["id"].startswith(ref) or (a["run_id"] or "").startswith(ref) for a in plans):
        raise SpecError("run", f"{ref!r} is too short for a prefix; give 4 or more characters of the run or artifact "
                        f"id ({_newest(store, plans)})")  # fmt: skip
    raise NotFoundError(
        f"run: no plan with run or artifact id {ref!r} in the store; `rightsize results` lists runs "
        f"({_newest(store, plans)})"
    )


def _newest(store: Store, plans: list[dict[str, Any]]) -> str:
    """'newest plan: run ID' over both kinds of plan (it named the newest serving plan under a newer generative one)."""
    generative = store.artifacts(kind="generative-plan")
    a = generative[0] if generative and generative[0]["created_at"] >= plans[0]["created_at"] else plans[0]
    return f"newest plan: run {a['run_id'] or a['id']}"


def matching_profile(
    store: Store,
    model: str | None,
    mode: str,
    env_id: str | None,
    key: Mapping[str, Any] | None = None,
    until: str | None = None,
) -> Profile | None:
    """The stored profile of ``model`` in ``mode`` the plan was built from (``key``: its env, input and tiny flag,
    recorded by the plan since 2026-11-28), else on ``env_id`` (any env when None): the largest one. Without the
    key a model with several profiles had charted another run's timings beside the plan's numbers. ``until`` (the
    plan's time): the measurements stored by then, so a later `bench` of the same configs does not redraw a stored
    plan's chart with timings it never saw."""
    if not model:
        return None
    if key and isinstance(key.get("input"), dict):
        exact = store.profile(model, mode, key["input"], str(key.get("env")), tiny=bool(key.get("tiny")), until=until)
        if exact is not None:
            return exact
    profiles = store.profiles(model, tiny=None, until=until)
    fits = [p for p in profiles if p.mode == mode and (env_id is None or p.env.id == env_id)]
    if not fits and env_id is not None:
        fits = [p for p in profiles if p.mode == mode]
    return max(fits, key=lambda p: (not any(m.tiny for m in p.measurements), len(p.ok())), default=None)


def stored_report_data(store: Store, record: dict[str, Any], catalog: Catalog | None = None) -> ReportData:
    """ReportData for a stored plan, with the measured profile and environment when the store has them;
    ``catalog``'s GPU tiers for a plan stored without any. A rules plan gets neither profile nor tiers: it had shown
    the newest stored profile of its ``model`` (any input) and a GPU tier for its rule-of-thumb RAM."""
    payload = record["payload"]
    env_id = None
    if record.get("run_id"):
        try:
            env_id = store.run(record["run_id"]).env_id
        except NotFoundError:
            env_id = None
    mode = "training" if payload.get("kind") == "training" else "inference"
    key = (payload.get("assumptions") or {}).get("profile_key")
    rules = payload.get("kind") == "rules"  # sized by rules of thumb: no profile of its model was measured for it
    profile = None if rules else matching_profile(store, payload.get("model"), mode, env_id,
                                                  key if isinstance(key, Mapping) else None,
                                                  until=record.get("created_at"))  # fmt: skip
    env = None
    if env_id:
        try:
            env = store.env(env_id)
        except NotFoundError:
            env = None
    tiers = gpu_memory_tiers(catalog) if catalog is not None and not rules else ()  # a rule's RAM is no GPU's
    return build_report_data(payload, profile=profile, env=env or (profile.env if profile else None), tiers=tiers)
