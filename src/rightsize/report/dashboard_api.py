"""The dashboard's JSON API and CSV export: the same store the pages show, for scripts and notebooks.

    /api/runs                  every run (id, kind, name, model, env, status, counts)
    /api/runs/ID               one run with its measurements and artifacts
    /api/measurements?model=M&format=csv    measurements, filtered; CSV with format=csv
    /api/plans                 stored plans, generative ones too (artifact id, name, model, recommendation)
    /api/plans/ID              one stored plan in full (artifact or run id, or a 4+ character prefix of one)
    /api/loadtests             stored load tests and validations

Read-only like the pages: GET and HEAD only, the same Host and token checks.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict
from typing import Any

from rightsize.errors import NotFoundError, SpecError
from rightsize.report.stored import find_generative_plan, find_plan
from rightsize.store import Store

__all__ = ["api_response"]

_LOADTEST_KINDS = ("loadtest", "validate")
MEASUREMENT_COLUMNS = (
    "model", "mode", "device", "precision", "batch_size", "threads", "input", "status", "reason", "p50_ms",
    "p95_ms", "p99_ms", "throughput_per_s", "peak_memory_bytes", "flops_per_sample", "param_bytes", "env_id",
    "tiny", "extra",
)  # fmt: skip


def _measurement(m: Any) -> dict[str, Any]:
    d = m.to_dict()
    lat = d.pop("latency_ms", None) or {}
    return d | {"p50_ms": lat.get("p50"), "p95_ms": lat.get("p95"), "p99_ms": lat.get("p99")}


_PLAN_KINDS = ("plan", "generative-plan")  # a generative plan (tokens, TTFT/TPOT) is stored under its own kind


def plan_summary(art: dict[str, Any]) -> dict[str, Any]:
    p = art["payload"]
    rec = p.get("recommendation") or {}
    generative = art["kind"] == "generative-plan"
    return {
        "id": art["id"], "created_at": art["created_at"], "name": p.get("name"), "model": p.get("model"),
        "kind": p.get("kind"), "feasible": bool(rec) if generative else p.get("feasible"),
        "instance": rec.get("instance"), "provider": rec.get("provider"),
        "precision": (p.get("target") or {}).get("weight_precision") if generative else rec.get("precision"),
        "cost_usd_per_hour": rec.get("usd_per_hour") if generative else rec.get("cost_usd_per_hour"),
        "price_date": p.get("price_date"),
    }  # fmt: skip


def _newest_first(st: Store, kinds: tuple[str, ...]) -> list[dict[str, Any]]:
    """The stored artifacts of ``kinds``, newest first: every plan (encoder/CNN and generative), every load test."""
    arts = [a for k in kinds for a in st.artifacts(kind=k)]
    return sorted(arts, key=lambda a: a["created_at"], reverse=True)


def _csv(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: json.dumps(v, sort_keys=True) if isinstance(v, dict | list) else v for k, v in r.items()})
    return buf.getvalue()


def api_response(st: Store, parts: list[str], query: dict[str, list[str]]) -> tuple[int, str, str]:
    """(status, body, content type) for ``/api/...`` (``parts`` without the leading "api")."""
    fmt = (query.get("format") or ["json"])[0].lower() or "json"  # format=CSV reads as csv, format= as json
    if fmt not in ("json", "csv"):
        raise SpecError("format", f"unknown {fmt!r}; use json, or csv on /api/measurements and /api/runs/ID")
    tables = parts == ["measurements"] or (len(parts) == 2 and parts[0] == "runs")  # the endpoints with a csv
    if fmt == "csv" and not tables and (parts in (["runs"], ["plans"], ["loadtests"]) or parts[:1] == ["plans"]):
        raise SpecError(
            "format", f"/api/{'/'.join(parts)} gives json only; csv is on /api/measurements and /api/runs/ID"
        )
    if parts == ["runs"]:
        return _json([asdict(r) for r in st.runs()])
    if len(parts) == 2 and parts[0] == "runs":
        run = st.run(parts[1])
        ms = [_measurement(m) for m in st.measurements(run_id=run.id)]
        arts = [{"id": a["id"], "kind": a["kind"], "created_at": a["created_at"]} for a in st.artifacts(run_id=run.id)]
        if fmt == "csv":
            return 200, _csv(ms, MEASUREMENT_COLUMNS), "text/csv; charset=utf-8"
        return _json(asdict(run) | {"measurements": ms, "artifacts": arts})
    if parts == ["measurements"]:
        model = query["model"][0] if query.get("model") else None
        ms = [_measurement(m) for m in st.measurements(model=model)]
        if fmt == "csv":
            return 200, _csv(ms, MEASUREMENT_COLUMNS), "text/csv; charset=utf-8"
        return _json(ms)
    if parts == ["plans"]:
        return _json([plan_summary(a) for a in _newest_first(st, _PLAN_KINDS)])
    if len(parts) == 2 and parts[0] == "plans":  # an artifact or run id, or a 4+ character prefix, as /report/ takes
        try:
            return _json(find_generative_plan(st, parts[1]) or find_plan(st, parts[1]))
        except NotFoundError:
            raise NotFoundError(f"no stored plan {parts[1]!r}; /api/plans lists them") from None
    if parts == ["loadtests"]:
        return _json(_newest_first(st, _LOADTEST_KINDS))
    raise NotFoundError(f"no API endpoint /api/{'/'.join(parts)}; see /api/runs, /api/measurements, /api/plans")


def _json(obj: Any) -> tuple[int, str, str]:
    return 200, json.dumps(obj, default=str, allow_nan=False, indent=1), "application/json"
