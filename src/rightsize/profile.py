"""The plain values passed along the data flow (no torch here; planning and reports import this).

Measurement   one config of a sweep on one machine (measure -> store)
Profile       a model's measurements on one machine + its environment (store -> estimate)
ServiceCurve  t(batch) ± band on one device and precision, measured or projected (estimate -> plan)
WorkProfile   a model's traced ops (rightsize.work_profile, re-exported here)
"""

from __future__ import annotations

import bisect
import math
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Literal

from rightsize.work_profile import OP_CLASSES as OP_CLASSES  # re-exported
from rightsize.work_profile import WorkProfile as WorkProfile  # re-exported

Provenance = Literal["measured", "projected"]
Status = Literal["ok", "failed"]


@dataclass(frozen=True)
class Latency:
    """Latency in milliseconds: percentiles of ``n`` values. The one latency summary: a bench
    measurement (with the repetitions' ``std``), a load test (HdrHistogram: p90, p99.9, max too), a
    simulation (``others``: any percentile asked for) and the validate table all use it."""

    p50: float
    p95: float
    p99: float
    mean: float | None = None
    std: float | None = None
    n: int = 0
    p90: float | None = None
    p99_9: float | None = None
    max: float | None = None
    others: dict[float, float] = field(default_factory=dict)  # percentile -> ms, e.g. {90.0: 41.2}

    @property
    def cv(self) -> float:
        """Coefficient of variation (std / mean); the service-time spread the planner simulates."""
        return self.std / self.mean if self.std and self.mean else 0.0

    def at(self, q: float) -> float | None:
        """The ``q``-th percentile (ms) when this summary has it, else None."""
        named = {50.0: self.p50, 90.0: self.p90, 95.0: self.p95, 99.0: self.p99, 99.9: self.p99_9, 100.0: self.max}
        got = named.get(float(q))
        return got if got is not None else self.others.get(float(q))

    def shifted(self, ms: float) -> Latency:
        """Every value ``ms`` later: a constant cost added to each request (the spread is unchanged)."""

        def add(x: float | None) -> float | None:
            return None if x is None else x + ms

        return replace(
            self, p50=self.p50 + ms, p95=self.p95 + ms, p99=self.p99 + ms, mean=add(self.mean), p90=add(self.p90),
            p99_9=add(self.p99_9), max=add(self.max), others={q: v + ms for q, v in self.others.items()},
        )  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        """The fields that are set (JSON keys ``p50``, ``p95``, ... in ms; ``others`` keyed by percentile)."""
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "others"}
        d = {k: v for k, v in d.items() if v is not None}
        if self.others:
            d["others"] = {str(k): v for k, v in self.others.items()}
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Latency:
        """Inverse of ``to_dict``; also reads older stores (``count`` for ``n``) and ignores unknown keys."""
        known = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in known and k != "others"}
        if "count" in d and "n" not in d:
            kw["n"] = d["count"]
        others = {float(k): float(v) for k, v in (d.get("others") or {}).items()}
        return cls(**kw, others=others)


@dataclass(frozen=True)
class Measurement:
    """One measured config. ``status == "failed"`` keeps ``reason`` and leaves the numbers None."""

    model: str
    mode: str  # inference | training
    device: str  # cpu | cuda
    precision: str  # fp32 | bf16 | fp16 | int8
    batch_size: int
    threads: int | None
    input: dict[str, int]  # e.g. {"seq_len": 64} or {"image_size": 224}
    status: Status
    reason: str | None = None
    latency_ms: Latency | None = None  # per batch (training: per optimizer step)
    throughput_per_s: float | None = None  # samples per second at the median latency
    peak_memory_bytes: int | None = None  # CUDA: max_memory_allocated; CPU: peak RSS above baseline
    reserved_memory_bytes: int | None = None  # CUDA: max_memory_reserved
    context_memory_bytes: int | None = None  # CUDA context + library handles
    activation_bytes: int | None = None  # saved-for-backward tensors (training)
    flops_per_sample: float | None = None  # forward FLOPs (training: forward + backward)
    param_bytes: int | None = None
    buffer_bytes: int | None = None
    optimizer: str | None = None  # training
    loss: float | None = None  # training: last loss
    env_id: str | None = None  # fingerprint id of the machine that measured it
    tiny: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """Identity of the config (not the result): reruns with the same key reuse the stored result."""
        inp = ",".join(f"{k}={v}" for k, v in sorted(self.input.items()))
        opt = self.optimizer if self.mode == "training" else "-"
        epochs = self.extra.get("epochs")  # a `bench --epochs N` run is its own config
        return (
            f"{self.model}|{self.mode}|{self.device}|{self.precision}|b{self.batch_size}|t{self.threads}|{inp}|{opt}"
            f"|tiny={int(self.tiny)}" + (f"|epochs={epochs}" if epochs else "")
        )

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if self.latency_ms is not None:
            d["latency_ms"] = self.latency_ms.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Measurement:
        """Inverse of ``to_dict``; fields this version does not know (a newer writer, a hand edit) are
        ignored rather than fatal, so one odd row never takes a whole store down."""
        known = {f.name for f in fields(cls)}
        d = {k: v for k, v in d.items() if k in known}
        lat = d.get("latency_ms")
        if isinstance(lat, dict):
            d["latency_ms"] = Latency.from_dict(lat)
        return cls(**d)


@dataclass(frozen=True)
class Gpu:
    """One CUDA device of an environment."""

    name: str
    memory_bytes: int = 0
    capability: str = ""
    multiprocessors: int = 0
    cuda: str | None = None
    driver: str | None = None


@dataclass(frozen=True)
class Environment:
    """A machine's fingerprint (``rightsize.measure.env.fingerprint``): what a measurement was taken on.

    ``id`` hashes the performance-relevant fields, so results are stored and reused per environment.
    On a cluster node mapped to an instance type, ``instance_type`` joins the hash and ``hardware_id``
    keeps the machine's own id (``rightsize.cluster.fingerprint``).
    """

    id: str
    cpu_model: str = "unknown"
    machine: str = ""
    physical_cores: int = 1
    logical_cores: int = 1
    isa: tuple[str, ...] = ()
    ram_bytes: int = 0
    gpus: tuple[Gpu, ...] = ()
    torch: str | None = None
    python: str = ""
    os: str = ""
    hostname: str = ""
    instance_type: str | None = None
    hardware_id: str | None = None
    members: tuple[str, ...] = ()  # a cluster's summary (id "cluster"): the environments it stands for
    cpu_signature: str = ""  # /proc/cpuinfo "cpu family/model" ("25/17"); older fingerprints lack it (not in id)

    @property
    def gpu_name(self) -> str | None:
        """The first GPU's name, None without one."""
        return self.gpus[0].name if self.gpus else None

    @property
    def machine_label(self) -> str:
        """The CPU model, and the first GPU's name when there is one ("Intel(R) Xeon(R) ... + NVIDIA H200")."""
        return self.cpu_model + (f" + {self.gpu_name}" if self.gpu_name else "")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["isa"], d["gpus"], d["members"] = list(self.isa), [asdict(g) for g in self.gpus], list(self.members)
        d = {k: v for k, v in d.items() if (v is not None and v != []) or k in ("torch", "isa", "gpus")}
        return d if self.cpu_signature else {k: v for k, v in d.items() if k != "cpu_signature"}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> Environment:
        """Inverse of ``to_dict``; tolerant of older or hand-written fingerprints (missing fields take
        their defaults, unknown ones are ignored), so one odd record never takes a store down."""
        d = dict(d or {})
        known = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in known}
        kw["id"], kw["cpu_signature"] = str(kw.get("id") or "unknown"), str(kw.get("cpu_signature") or "")
        kw["isa"] = tuple(str(x) for x in kw.get("isa") or ())
        kw["members"] = tuple(str(x) for x in kw.get("members") or d.get("envs") or ())
        gpu_fields = {f.name for f in fields(Gpu)}
        kw["gpus"] = tuple(
            Gpu(**{k: v for k, v in g.items() if k in gpu_fields}) if isinstance(g, Mapping) else Gpu(str(g))
            for g in kw.get("gpus") or ()
        )
        return cls(**kw)


@dataclass(frozen=True)
class Profile:
    """Measurements of one model/mode/input on one machine, as the estimator consumes them."""

    model: str
    mode: str
    input: dict[str, int]
    env: Environment
    measurements: tuple[Measurement, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.env, Environment):  # a fingerprint read from JSON
            object.__setattr__(self, "env", Environment.from_dict(self.env))

    def ok(self, device: str | None = None, precision: str | None = None) -> list[Measurement]:
        return [
            m
            for m in self.measurements
            if m.status == "ok"
            and (device is None or m.device == device)
            and (precision is None or m.precision == precision)
        ]

    def rows(self) -> list[dict[str, Any]]:
        """One flat dict per measured config, as ``bench`` tabulates it (latency in ms): what ``to_dataframe``
        tabulates."""
        out = []
        for m in self.measurements:
            lat = m.latency_ms
            out.append({
                "model": m.model, "mode": m.mode, "device": m.device, "precision": m.precision,
                "batch_size": m.batch_size, "threads": m.threads, "status": m.status,
                "p50_ms": lat.p50 if lat else None, "p95_ms": lat.p95 if lat else None,
                "p99_ms": lat.p99 if lat else None, "std_ms": lat.std if lat else None, "repeats": lat.n if lat else 0,
                "throughput_per_s": m.throughput_per_s, "peak_memory_bytes": m.peak_memory_bytes,
                "flops_per_sample": m.flops_per_sample, "converged": m.extra.get("ci_converged"),
                "contended": bool(m.extra.get("contended")), "reason": m.reason,
            })  # fmt: skip
        return out

    def to_dataframe(self) -> Any:
        """The measurements as a pandas DataFrame, one row each (pandas is needed: pip install pandas)."""
        from rightsize.jsonout import to_dataframe

        return to_dataframe(self.rows())

    def __repr__(self) -> str:
        """Short (the dataclass's ran to 12.8 KB for 9 configs), failed configs apart (they had been listed as ok)."""

        def configs(ms: list[Measurement]) -> str:
            return ", ".join(f"{k} x{n}" for k, n in Counter(f"{m.device} {m.precision}" for m in ms).items()) or "none"

        failed = [m for m in self.measurements if m.status != "ok"]
        return (f"Profile({self.model!r}, {self.mode}, {self.input}, {len(self.measurements)} measurements "
                f"({len(self.ok())} ok: {configs(self.ok())}" + (f"; {len(failed)} failed: {configs(failed)}"
                if failed else "") + f"), env {self.env.id!r})")  # fmt: skip

    def _repr_html_(self) -> str:
        """Notebook display: the machine and the first measurements."""
        import html

        from rightsize.jsonout import html_table

        cols = ["device", "precision", "batch_size", "threads", "status", "p50_ms", "p95_ms", "throughput_per_s"]
        head = f"{self.model} {self.mode} {self.input} on {self.env.machine_label} (env {self.env.id})"
        return f"<div><b>{html.escape(head)}</b>{html_table(self.rows(), cols, limit=20)}</div>"

    def to_json(self) -> str:
        """The profile as ``bench --json``'s records under the model, input and machine fingerprint."""
        from rightsize.jsonout import to_json

        return to_json({"model": self.model, "mode": self.mode, "input": self.input, "env": self.env.to_dict(),
                        "measurements": [m.to_dict() for m in self.measurements]})  # fmt: skip


def _between(bs: tuple[int, ...], values: tuple[float, ...], batch: float) -> float:
    """``values`` (one per batch size ``bs``) at ``batch`` in [bs[0], bs[-1]], linear between the points."""
    i = bisect.bisect_left(bs, batch)
    if bs[i] == batch:
        return values[i]
    return values[i - 1] + (values[i] - values[i - 1]) * (batch - bs[i - 1]) / (bs[i] - bs[i - 1])


@dataclass(frozen=True)
class ServiceCurve:
    """Batch service time t(b) on one device (per replica) and precision.

    ``latency_ms[i]`` is the median time to run a batch of ``batch_sizes[i]``; ``cv[i]`` its spread
    (std/mean) for the simulator; ``band_lo``/``band_hi`` multiply the median for the uncertainty
    band (1.0/1.0 when measured on that very device). Between points t is linear in b; beyond the
    last point it extends the last segment's slope (never below the last point's per-sample time).
    """

    device: str  # catalog accelerator name ("A10G") or CPU instance description ("cpu:c7i.2xlarge")
    precision: str
    batch_sizes: tuple[int, ...]
    latency_ms: tuple[float, ...]
    cv: tuple[float, ...]
    provenance: Provenance
    band_lo: float = 1.0
    band_hi: float = 1.0
    source: str = ""  # env id for measured; "roofline+calibration (…)" for projected
    memory_bytes: tuple[int | None, ...] | None = None  # peak memory per batch size, when known
    instance: str | None = None  # instance type this curve was built for, if specific
    threads: int | None = None  # CPU: intra-op threads of one worker (one replica)
    workers: int = 1  # CPU: worker processes per instance (replicas per instance), each on its own cores
    # GPU projections: the share of each batch's time the device itself works (the rest it waits for the host
    # to dispatch eager ops); the energy model's utilization is busy time x this share. None: unknown (1).
    device_share: tuple[float, ...] | None = None
    # GPU projections: the share of the device's own time its math units work (each kernel's FLOPs at the attainable
    # rate: all of a compute-bound kernel, part of one that streams memory, which draws less power; plan/energy.py).
    # None: unknown (the energy model then counts it all as math).
    compute_share: tuple[float, ...] | None = None
    # Projections whose band differs from batch to batch (GPU: a host-bound small batch errs wider than a
    # device-bound large one, estimate/bands.py): the band at each batch size. band_lo / band_hi then hold the
    # widest of them (the smallest lo, the largest hi). None: one band for every batch size.
    band_los: tuple[float, ...] | None = None
    band_his: tuple[float, ...] | None = None
    # CPU projections of a precision onto an ISA path the measuring machine lacks (AMX bf16 from a machine without
    # AMX), anchored on its fp32 measurement: less known than one anchored on its own precision, even where the two
    # bands come out alike (the planner's tie-break, plan/explain.rank)
    extrapolated: bool = False
    # what a plan row must say about this curve's footing (a precision extrapolated from fp32, anchors timed while
    # this machine was busy, sizing at the band's slow edge): each candidate built on it carries these as notes
    # (plan/options.Option.candidate)
    caveats: tuple[str, ...] = ()
    # the largest batch the model ran where its own forward failed a larger one here (``batch_limit``): batching
    # stays at or under it (plan/options.Option.fits). None: no such failure
    batch_limit: int | None = None

    def __post_init__(self) -> None:
        n = len(self.batch_sizes)
        if n == 0 or len(self.latency_ms) != n or len(self.cv) != n:
            raise ValueError("batch_sizes, latency_ms and cv must be non-empty and of equal length")
        bands = (self.band_los, self.band_his)
        if any((b is None) != (bands[0] is None) or (b is not None and len(b) != n) for b in bands):
            raise ValueError("band_los and band_his must both be given, one per batch size, or neither")
        if list(self.batch_sizes) != sorted(set(self.batch_sizes)):
            raise ValueError("batch_sizes must be strictly increasing")

    @property
    def max_batch(self) -> int:
        return self.batch_sizes[-1]

    def t_ms(self, batch: float) -> float:
        """Median service time of a batch of ``batch`` samples, milliseconds."""
        bs, ts = self.batch_sizes, self.latency_ms
        if batch <= bs[0]:
            return ts[0]  # a smaller batch is never modelled as faster than the smallest measured
        if batch > bs[-1]:
            if len(bs) == 1:
                return ts[0] * batch / bs[0]
            slope = max((ts[-1] - ts[-2]) / (bs[-1] - bs[-2]), ts[-1] / bs[-1] * 0.5, 0.0)
            return ts[-1] + slope * (batch - bs[-1])
        return _between(bs, ts, batch)

    def device_share_at(self, batch: float) -> float:
        """The device's working share of a batch's time at ``batch`` (interpolated; 1.0 when unknown)."""
        return self._share_at(self.device_share, batch)

    def compute_share_at(self, batch: float) -> float:
        """The share of the device's time its math units work at ``batch`` (interpolated; 1.0 when unknown)."""
        return self._share_at(self.compute_share, batch)

    def _share_at(self, shares: tuple[float, ...] | None, batch: float) -> float:
        if shares is None:
            return 1.0
        bs = self.batch_sizes
        return _between(bs, shares, min(max(batch, bs[0]), bs[-1]))

    def band_at(self, batch: float) -> tuple[float, float]:
        """(lo, hi) multipliers on the median time at ``batch`` (interpolated between batch sizes)."""
        if self.band_los is None or self.band_his is None:
            return self.band_lo, self.band_hi
        return self._share_at(self.band_los, batch), self._share_at(self.band_his, batch)

    def at_band_edge(self, edge: str, **changes: Any) -> ServiceCurve:
        """A copy at one edge of its band (``"lo"`` or ``"hi"``): every time x that batch size's multiplier, the
        band re-centred on the new times (at "hi" it then runs from lo/hi to 1)."""
        los = self.band_los or tuple(self.band_lo for _ in self.batch_sizes)
        his = self.band_his or tuple(self.band_hi for _ in self.batch_sizes)
        factors = los if edge == "lo" else his
        new_los = tuple(lo / f for lo, f in zip(los, factors, strict=True))
        new_his = tuple(hi / f for hi, f in zip(his, factors, strict=True))
        d = asdict(self)
        d.update(
            latency_ms=tuple(t * f for t, f in zip(self.latency_ms, factors, strict=True)),
            batch_sizes=tuple(self.batch_sizes),
            cv=tuple(self.cv),
            band_lo=min(new_los),
            band_hi=max(new_his),
            band_los=new_los if self.band_los is not None else None,
            band_his=new_his if self.band_his is not None else None,
        )
        d.update(changes)
        return ServiceCurve(**d)

    def cv_at(self, batch: float) -> float:
        i = min(range(len(self.batch_sizes)), key=lambda k: abs(self.batch_sizes[k] - batch))
        return self.cv[i]

    def throughput_per_s(self, batch: float) -> float:
        t = self.t_ms(batch)
        return batch * 1000.0 / t if t > 0 else math.inf

    def best_throughput_batch(self) -> int:
        return max(self.batch_sizes, key=self.throughput_per_s)

    @property
    def layout(self) -> str:
        """ "4x2" for 4 workers of 2 threads each (CPU), "" when not a CPU layout."""
        return f"{self.workers}x{self.threads}" if self.threads else ""

    def scaled(self, factor: float, **changes: Any) -> ServiceCurve:
        """A copy with every latency multiplied by ``factor`` (and other fields replaced)."""
        d = asdict(self)
        d["latency_ms"] = tuple(t * factor for t in self.latency_ms)
        d["batch_sizes"] = tuple(self.batch_sizes)
        d["cv"] = tuple(self.cv)
        d.update(changes)
        return ServiceCurve(**d)


_MODEL_ERROR = re.compile(r"^\w*(Error|Exception)\b")  # a failure's reason that is the model's own exception


def batch_limit(profile: Profile) -> tuple[int, int, str] | None:
    """(largest batch that ran, the smallest larger one that failed, its reason) when the model's own forward failed
    a batch larger than one that ran here (a model that takes batch 1 only): not out of memory (``classify_failure``
    names it so), not a time limit. None otherwise. A plan had batched such a model at 32."""
    ran = {m.batch_size for m in profile.ok()}
    failed = sorted((m.batch_size, m.reason or "") for m in profile.measurements
                    if m.status == "failed" and _MODEL_ERROR.match(m.reason or ""))  # fmt: skip
    for size, reason in failed:
        below = [b for b in ran if b < size]
        if below:
            return max(below), size, reason
    return None


def limit_batches(curve: ServiceCurve, limit: tuple[int, int, str]) -> ServiceCurve:
    """``curve`` batching at most ``limit[0]`` samples (``batch_limit``), saying why on every row built on it."""
    ran, failed, reason = limit
    note = f"batches capped at {ran}: the model failed at batch {failed} here ({reason[:120]})"
    return replace(curve, batch_limit=ran, caveats=(*curve.caveats, note))


def measured_curve(
    profile: Profile, precision: str, device: str = "cpu", threads: int | None = None, *, name: str | None = None
) -> ServiceCurve | None:
    """This machine's measured t(batch) for ``precision`` on ``device``: the one rule every consumer uses.

    ``threads``: only measurements taken with that many intra-op threads (what a server pinned to that
    many cores runs). Otherwise, per batch size, the most threads measured (``None``, all cores, counts
    as most): one worker with every core, as measured. Contended measurements (``extra.contended``) are
    used only where no clean one exists for that batch size.
    """
    by_batch: dict[int, tuple[tuple[int, int], Measurement]] = {}
    for m in profile.ok(device, precision):
        if m.latency_ms is None or (threads is not None and m.threads != threads):
            continue
        rank = (0 if m.extra.get("contended") else 1, 1 << 30 if m.threads is None else m.threads)
        best = by_batch.get(m.batch_size)
        if best is None or rank > best[0]:
            by_batch[m.batch_size] = (rank, m)
    if not by_batch:
        return None
    pts = [by_batch[b][1] for b in sorted(by_batch)]
    stats = [m.latency_ms for m in pts if m.latency_ms is not None]
    used = {m.threads for m in pts}
    busy = [str(m.batch_size) for m in pts if m.extra.get("contended")]
    caveats = (
        (f"batch {', '.join(busy)} timed only while this machine was busy: its times read slow (a plan from them "
         "errs safe, or calls a fitting option infeasible); `rightsize bench --fresh` on a quiet machine",)
        if busy else ()
    )  # fmt: skip
    return ServiceCurve(
        device=name or f"{device}:local",
        precision=precision,
        batch_sizes=tuple(m.batch_size for m in pts),
        latency_ms=tuple(s.p50 for s in stats),
        cv=tuple(s.cv for s in stats),
        provenance="measured",
        source=profile.env.id,
        memory_bytes=tuple(m.peak_memory_bytes for m in pts),
        threads=next(iter(used)) if len(used) == 1 and device == "cpu" else None,
        caveats=caveats,
    )
