"""rightsize from Python (notebooks, scripts): the same workflows the CLI runs, returning typed records.

    import rightsize.api as rs

    rec = rs.plan("examples/sentiment-api.yaml")      # PlanRecord (measures this machine when needed)
    rec.recommendation                                 # Candidate: instance, cost, predicted latency
    rec.to_dataframe()                                 # every candidate, one row each (pandas)
    rec.report("plan.html")                            # the one-page report
    prof = rs.measure("examples/quick.yaml")           # Profile: the local measurements (.rows(), .to_dataframe())
    est = rs.memory("llama-7b", mode="infer", precision="fp16", seq_len=2048)   # MemoryEstimate (.to_dict())
    with rs.diagnose() as w:                           # watch your own loop
        train_one_epoch()
    print(w.report())

A spec is a YAML path, a dict in the spec's schema, or a ``Workload``. ``store`` defaults to the user
cache store (as the CLI's); ``catalog`` is a CSV of rows to add or override (as ``--catalog``).
"""

from __future__ import annotations

import html
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# At run time, not under TYPE_CHECKING: typing.get_type_hints(rs.plan) (a notebook's help, an IDE) resolves the
# annotations here, and had raised NameError. None of these imports torch; ``import rightsize`` still loads none.
from rightsize.catalog import Catalog
from rightsize.diagnose import Watching
from rightsize.errors import SpecError
from rightsize.estimate.memory import MemoryEstimate
from rightsize.inputfile import short
from rightsize.plan import Candidate, PlanResult
from rightsize.profile import Profile
from rightsize.spec import Workload
from rightsize.store import Store

__all__ = ["PlanRecord", "diagnose", "measure", "memory", "plan", "workload"]


SEED_MAX = 2**32 - 1  # as the CLI's --seed


def _argument(name: str, value: Any, types: tuple[type, ...], what: str) -> None:
    """A SpecError naming the argument when ``value`` is not of ``types`` (a bool is not an int here): a wrong type
    had surfaced as pathlib's or numpy's TypeError from deep inside."""
    if (isinstance(value, bool) and bool not in types) or not isinstance(value, types):
        raise SpecError(name, f"must be {what}, got {type(value).__name__} {short(value)}")


def workload(spec: str | Path | dict[str, Any] | Workload) -> Workload:
    """A validated ``Workload`` from a YAML path, a dict or a Workload (returned as is). A zoo name that is not in
    the zoo is refused here, as ``rightsize plan`` refuses it, not at the first measurement."""
    from rightsize.models.byo import is_user_ref
    from rightsize.models.zoo import get_entry
    from rightsize.spec import load_spec
    from rightsize.spec.load import parse_spec

    if isinstance(spec, Workload):
        return spec
    if isinstance(spec, dict):
        loaded = parse_spec(spec, "spec")
    else:
        _argument("spec", spec, (str, Path), "a YAML path, a dict in the spec's schema or a Workload")
        if isinstance(spec, str) and ("\n" in spec or spec.lstrip().startswith(("name:", "model:"))):
            # not yaml.safe_load: YAML 1.1 reads `deadline_hours: 1:30` as 90, which the spec's own loader refuses
            raise SpecError("spec", "is YAML text, not a path; pass the file's path, or "
                            "rightsize.inputfile.load_yaml(text, 'spec') as a dict")  # fmt: skip
        loaded = load_spec(spec)
    if not is_user_ref(loaded.model):
        get_entry(loaded.model)
    return loaded


def _store_type(store: object) -> None:
    if store is not None and not isinstance(store, Store):
        _argument("store", store, (str, Path), "a path to a SQLite store, a Store or None")


def _store(store: str | Path | Store | None) -> Store:
    """The store plan and measure write to: a path opened, or a Store that is open and writable (a read-only or
    closed one had raised sqlite3's OperationalError / ProgrammingError from deep inside the sweep)."""
    from rightsize.store import default_store_path

    _store_type(store)
    if not isinstance(store, Store):
        path = Path(store) if store is not None else default_store_path()
        new = not path.exists()
        opened = Store(path)
        if new:  # a typo in the path had created an empty store and measured for minutes without a word
            print(f"rightsize: new store at {path}: nothing measured yet, measuring now", file=sys.stderr)
        return opened
    if not store.is_open:
        raise SpecError("store", f"the Store on {str(store.path)!r} is closed (its with block has ended); pass the "
                        "path, or a Store that is open")  # fmt: skip
    if store.read_only:
        raise SpecError("store", f"the Store on {str(store.path)!r} was opened read_only=True, and this stores what "
                        "it measures and plans; pass the path, or Store(path)")  # fmt: skip
    return store


def _catalog(catalog: str | Path | Catalog | None) -> Catalog:
    """A loaded catalog as is; a CSV path merged over the shipped tables; None: shipped + $RIGHTSIZE_CATALOG."""
    from rightsize.catalog import load_catalog

    if isinstance(catalog, Catalog):
        return catalog
    if catalog is not None:
        _argument("catalog", catalog, (str, Path), "a CSV path, a Catalog or None")
    return load_catalog(catalog)


@dataclass
class PlanRecord:
    """One plan: the ranked candidates and the evidence behind them (profile, curves, memory)."""

    result: PlanResult
    context: dict[str, Any] = field(default_factory=dict, repr=False)
    plan_id: str | None = None  # the stored plan (`rightsize report ID`, the dashboard), as the CLI's "stored as plan"

    @property
    def recommendation(self) -> Candidate | None:
        return self.result.recommendation

    @property
    def candidates(self) -> list[Candidate]:
        return self.result.candidates

    @property
    def why(self) -> list[str]:
        return self.result.why

    @property
    def warnings(self) -> list[str]:
        return self.result.warnings

    def to_dict(self, top: int | None = None) -> dict[str, Any]:
        if top is not None:  # a slice end: -1 dropped the last candidate, 1.5 was slice()'s TypeError
            _argument("top", top, (int,), "a count of candidates >= 0, or None for all")
            if top < 0:
                raise SpecError("top", f"must be a count of candidates >= 0, or None for all; got {top}")
        return self.result.to_dict(top=top)

    def to_json(self, top: int | None = None) -> str:
        from rightsize.jsonout import to_json

        return to_json(self.to_dict(top))

    def rows(self) -> list[dict[str, Any]]:
        """One flat dict per candidate (best first): what ``to_dataframe`` tabulates. ``engine``: what the plan's model
        runs on (``engines: [torch, onnxruntime]`` picks one; nothing else in a row said which)."""
        from rightsize.models.byo import engine_of

        engine = engine_of(self.result.model)
        out = []
        for rank, c in enumerate(self.candidates, 1):
            lat = c.latency
            out.append({
                "rank": rank, "engine": engine, "provider": c.provider, "region": c.region, "instance": c.instance,
                "device_class": c.device_class, "device": c.device, "count": c.count, "replicas": c.replicas,
                "precision": c.precision, "purchase": c.purchase, "feasible": c.feasible,
                "cost_usd_per_hour": c.cost_usd_per_hour, "cost_usd_total": c.cost_usd_total,
                "cost_usd_per_1m_requests": c.cost_usd_per_1m_requests, "runtime_hours": c.runtime_hours,
                "p50_ms": lat.p50 if lat else None, "p95_ms": lat.p95 if lat else None,
                "p99_ms": lat.p99 if lat else None, "utilization": lat.utilization if lat else None,
                "max_batch": c.batching.max_batch if c.batching else None,
                "workers_per_instance": c.workers_per_instance, "threads_per_worker": c.threads_per_worker,
                "provenance": c.provenance, "price_date": c.price_date, "reasons": "; ".join(c.reasons),
            })  # fmt: skip
        return out

    def to_dataframe(self) -> Any:
        """The candidates as a pandas DataFrame (pandas is needed: pip install pandas)."""
        from rightsize.jsonout import to_dataframe

        return to_dataframe(self.rows())

    def report(self, path: str | Path) -> Path:
        """Write the one-page report (``.html`` or ``.md``) with the same evidence ``rightsize plan --report``
        uses, and return its path."""
        from rightsize.workflows.plan import write_plan_report

        _argument("path", path, (str, Path), "a file path ending in .html or .md")
        try:
            write_plan_report(self.result, Path(path), self.context)
        except SpecError as e:  # the report names the CLI's option: "--report: must end in .html or .md"
            if e.field == "--report":
                raise SpecError("path", e.problem) from None
            raise
        return Path(path)

    def __repr__(self) -> str:
        rec = self.recommendation
        head = f"PlanRecord({self.result.workload!r}, {len(self.candidates)} candidates"
        return head + (f", recommends {self.result.why[0]!r})" if rec is not None else ", none feasible)")

    def _repr_html_(self) -> str:
        """Notebook display: the recommendation, its reasons and the top candidates."""
        from rightsize.jsonout import html_table

        cols = ["rank", "engine", "instance", "device", "count", "precision", "purchase", "cost_usd_per_hour", "p95_ms",
                "runtime_hours", "feasible"]  # fmt: skip
        why = "".join(f"<li>{html.escape(w)}</li>" for w in self.why)
        warn = "".join(f"<li>{html.escape(w)}</li>" for w in self.warnings)
        return (
            f"<div><b>{html.escape(self.result.workload)}</b> ({html.escape(self.result.model)})<ul>{why}</ul>"
            + (f"<i>check</i><ul>{warn}</ul>" if warn else "")
            + html_table(self.rows(), cols)
            + "</div>"
        )


def plan(
    spec: str | Path | dict[str, Any] | Workload,
    *,
    store: str | Path | Store | None = None,
    catalog: str | Path | Catalog | None = None,
    progress: bool = False,
    seed: int = 0,
) -> PlanRecord:
    """Plan ``spec`` (measuring this machine when the store has no profile yet), as ``rightsize plan``."""
    from rightsize.measure.runner import exit_if_reimported
    from rightsize.workflows.plan import plan_spec

    exit_if_reimported()  # an unguarded script imported again by a measuring child: the parent says why
    _store_type(store)
    _argument("progress", progress, (bool,), "True or False")
    _argument("seed", seed, (int,), f"an integer 0..{SEED_MAX}")
    if not 0 <= seed <= SEED_MAX:
        raise SpecError("seed", f"must be 0..{SEED_MAX}, got {seed}")
    w = workload(spec)
    if w.targets is None:
        raise SpecError("targets", "the spec has no targets; add online, batch or training (see examples/)")
    from rightsize.workflows.plan import plan_record

    st = _store(store)
    result, context = plan_spec(w, st, _catalog(catalog), progress=progress, seed=seed)
    # stored whole, as `rightsize plan` stores it: `rightsize report ID` and the dashboard had never seen API plans
    plan_id = st.save_artifact(None, "plan", {"name": w.name, **plan_record(result, context)})
    return PlanRecord(result, context, plan_id)


def measure(
    spec: str | Path | dict[str, Any] | Workload, *, store: str | Path | Store | None = None, progress: bool = False
) -> Profile:
    """This machine's profile of ``spec``'s model (its sweep measured where the store lacks it), as ``bench``.
    UnsupportedError when the spec leaves nothing this machine can run (devices: [cuda] here), RunFailedError when
    every config failed (each failure's reason stays in the store): as ``bench`` exits 2 and 1 for them."""
    from rightsize.errors import RunFailedError, UnsupportedError
    from rightsize.measure.profile_source import spec_profile
    from rightsize.measure.runner import exit_if_reimported

    exit_if_reimported()  # an unguarded script imported again by a measuring child: the parent says why
    _argument("progress", progress, (bool,), "True or False")
    w = workload(spec)
    profile = spec_profile(w, _store(store), progress=progress)
    if not profile.measurements:
        raise UnsupportedError(f"nothing measured: the spec's devices ({', '.join(w.devices)}) and precisions "
                               f"({', '.join(w.precisions)}) leave no config this machine can run. To fix: a "
                               "precision the device runs (cpu: fp32, bf16, int8), a device it has (devices: [cpu]), "
                               "or run the spec where those devices are")  # fmt: skip
    if all(m.status == "failed" for m in profile.measurements):
        m = profile.measurements[0]
        raise RunFailedError(f"every config of {w.model} failed here ({len(profile.measurements)}), e.g. batch "
                             f"{m.batch_size} {m.precision} on {m.device}: {(m.reason or '?')[:200]}")  # fmt: skip
    return profile


def memory(model: str, *, catalog: str | Path | Catalog | None = None, **kwargs: Any) -> MemoryEstimate:
    """Peak memory of ``model`` (zoo name or your own: see docs/models.md), as ``rightsize memory``, with the GPU
    tiers of ``catalog`` (as ``plan``'s); keywords as ``rightsize.estimate.memory_estimate.estimate_memory``
    (mode, precision, batch_size, seq_len, device, tiers, …)."""
    import inspect

    from rightsize.errors import did_you_mean
    from rightsize.estimate.memory_estimate import estimate_memory
    from rightsize.estimate.memory_tiers import GpuTier, parse_tiers

    _argument("model", model, (str,), "a zoo name or your model's ref (see docs/models.md)")
    known = [p for p in inspect.signature(estimate_memory).parameters if p not in ("model", "catalog")]
    for name in kwargs:  # "estimate_memory() got an unexpected keyword argument" named an internal function
        if name not in known:
            hint = did_you_mean(name, known) or f" Known: {', '.join(known)}."
            raise SpecError(name, f"is not an argument of rightsize.memory.{hint}")
    for name in ("batch_size", "seq_len", "image_size"):
        if kwargs.get(name) is not None:
            _argument(name, kwargs[name], (int,), "an integer")
    for name in ("mode", "precision", "device", "optimizer"):
        if name in kwargs:
            _argument(name, kwargs[name], (str,), "a string, as the CLI's option of that name takes")
    for name in ("fused", "advise", "tiny"):  # fused="no" had been stored as given and traced as fused
        if name in kwargs:
            _argument(name, kwargs[name], (bool,), "True or False")
    tiers = kwargs.get("tiers")
    if (
        tiers is not None
        and not isinstance(tiers, str)
        and not (isinstance(tiers, list) and all(isinstance(t, GpuTier) for t in tiers))
    ):
        raise SpecError("tiers", f"must be 'builtin', GiB sizes such as '8,16,24', or a list of GpuTier; got "
                        f"{short(tiers)}")  # fmt: skip
    try:
        if isinstance(tiers, str):  # the CLI's --tiers text: "builtin" or "8,16,24"
            kwargs["tiers"] = parse_tiers(tiers)
        return estimate_memory(model, catalog=_catalog(catalog), **kwargs)
    except SpecError as e:  # the estimator names the CLI's fields (batch, seq, image, --tiers): say the argument's
        if e.field in _MEMORY_ARGUMENTS:
            raise SpecError(_MEMORY_ARGUMENTS[e.field], e.problem) from None
        raise


_MEMORY_ARGUMENTS = {"batch": "batch_size", "seq": "seq_len", "image": "image_size", "--tiers": "tiers"}


def diagnose() -> Watching:
    """``with rs.diagnose() as w: ...`` watches the loop in the block; ``w.report()`` is the checklist."""
    return Watching()
