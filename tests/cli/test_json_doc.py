"""docs/json.md stays true: every key ``--json`` prints has a line there, and every line names a key it prints.

The plans are made in-process from hand-built service curves (plan_fixtures: no measuring); the generative plan
runs the real ``rightsize plan --json`` on a four-instance spec; ``memory`` and ``bench`` records come from their
serialisers."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_kit import run_cli
from plan_fixtures import cpu_curve, gpu_curve, small_catalog

from rightsize.cli.bench import record
from rightsize.estimate.memory import MemoryEstimate
from rightsize.plan import MemoryModel, plan
from rightsize.profile import Latency, Measurement
from rightsize.spec import parse_spec

DOC = Path(__file__).resolve().parents[2] / "docs" / "json.md"
KINDS = ("online", "batch", "training", "rules")
Obj = dict[str, Any]

_ONLINE = {"rate_per_s": 10, "latency": {"percentile": 90, "bound_ms": 80}}
_MIX = [{"samples": 1, "share": 0.9}, {"samples": 16, "share": 0.1}]
SPECS: dict[str, dict[str, Any]] = {
    "online": {"model": "distilbert", "targets": {"online": _ONLINE}},
    # spot only and part-time traffic: the fleet's interruptions, the spare's draw and the idle policy
    "online-spot": {
        "model": "distilbert",
        "targets": {"online": _ONLINE, "purchase": ["spot"], "cold_start": {"active_hours_per_day": 8}},
    },
    "online-mix": {
        "model": "distilbert",
        "targets": {"online": {**_ONLINE, "latency": {"bound_ms": 300}, "request_mix": _MIX}},
    },
    "batch": {"model": "distilbert", "targets": {"batch": {"items": 1_000_000, "deadline_hours": 6}}},
    "training": {
        "model": "bert-base",
        "mode": "training",
        "targets": {"training": {"steps": 1000, "batch_size": 16}},
    },
    "rules": {"model": "simplenet", "targets": {"kind": "classic_ml", "rows": 1_000_000}},
}
GENERATIVE = """name: json-doc
model: llama-7b
targets:
  providers: [aws]
  instances: [g5.xlarge, g5.2xlarge, c7i.48xlarge, g4dn.xlarge]
  generative:
    rate_per_s: 1
    prompt_tokens: 256
    output_tokens: 64
    ttft: {percentile: 95, bound_ms: 3000}
    tpot: {percentile: 50, bound_ms: 100}
"""


def doc_tables() -> dict[str, dict[str, list[str]]]:
    """Heading -> field -> the row's cells: the first backticked cell of each table row under the heading."""
    out: dict[str, dict[str, list[str]]] = {}
    head = ""
    for line in DOC.read_text().splitlines():
        if line.startswith("#"):
            head = line.lstrip("#").strip()
        elif m := re.match(r"\|\s*`([^`]+)`\s*\|", line):
            out.setdefault(head, {})[m.group(1)] = [c.strip() for c in line.strip().strip("|").split("|")]
    return out


@pytest.fixture(scope="module")
def plans() -> dict[str, Obj]:
    curves = [cpu_curve("c.2x", 20.0, 15.0), cpu_curve("c.4x", 11.0, 8.0), gpu_curve("T4", 4.0, 0.2),
              gpu_curve("A100-80GB", 2.0, 0.05)]  # fmt: skip
    memory = {"fp32": MemoryModel(3e8, 2e6), "fp16": MemoryModel(1.5e8, 1e6)}
    out = {}
    for name, spec in SPECS.items():
        r = plan(parse_spec(spec), [] if name == "rules" else curves, small_catalog(), memory)
        out[name] = json.loads(json.dumps(r.to_dict(top=10), allow_nan=False))
    return out


@pytest.fixture
def generative(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Obj:
    """The real `rightsize plan --json` on a generative spec: its head is the CLI's, not a serialiser's."""
    (tmp_path / "chat.yaml").write_text(GENERATIVE)
    monkeypatch.setenv("RIGHTSIZE_CATALOG", "")
    code, out, err = run_cli(["plan", str(tmp_path / "chat.yaml"), "--json", "--store", str(tmp_path / "s.sqlite")],
                             capsys)  # fmt: skip
    assert code == 0, err
    d: Obj = json.loads(out)
    return d


def rows_of(d: Obj) -> Iterator[Obj]:
    """Every candidate row of a plan: the recommendation, the candidates, the frontier and the fleet's pools."""
    yield from (c for c in [d["recommendation"], *d["candidates"], *d["pareto"]] if c)
    fleet = d["fleet"] or {}
    split = fleet.get("split") or {}
    yield from (c for c in (fleet.get("single"), split.get("small"), split.get("large")) if c)


def others_of(d: Obj) -> Iterator[Obj]:
    """The rows that also name their model and engine: the alternative and each other engine's plan."""
    yield from (c for c in [d["alternative"], *d["engine_plans"].values()] if c)


def keys(objs: list[Obj]) -> set[str]:
    assert objs, "no object of this kind in the plans made: the check would pass vacuously"
    return {k for o in objs for k in o}


def actual(plans: dict[str, Obj], gen: Obj) -> dict[str, set[str]]:
    """Heading of docs/json.md -> the keys the real output has there."""
    ds = list(plans.values())
    rows = [r for d in ds for r in rows_of(d)]
    nested = {f"`{name}`": keys([r[name] for r in rows if r.get(name)]) for name in
              ("batching", "latency_ms", "spot", "energy", "idle")}  # fmt: skip
    fleets = [d["fleet"] for d in ds if d["fleet"]]
    splits = [f["split"] for f in fleets if f["split"]]
    gen_rows = [c for c in [gen["recommendation"], gen["best_cpu"], gen["best_gpu"], *gen["candidates"]] if c]
    bench = record(Measurement("m", "inference", "cpu", "fp32", 1, None, {"seq_len": 8}, "ok",
                               latency_ms=Latency(1.0, 2.0, 3.0, mean=1.5, std=0.1, n=5)))  # fmt: skip
    return {
        "Top level": keys(ds),
        "Candidate row": keys(rows),
        **nested,
        "`alternative` and `engine_plans` entries": keys([o for d in ds for o in others_of(d)]) - keys(rows),
        "`fleet`": keys(fleets),
        "`fleet.mix[]`": keys([m for f in fleets for m in f["mix"]]),
        "`fleet.split`": keys(splits),
        "Top level (generative)": set(gen),
        "Candidate (generative)": keys(gen_rows),
        "`infeasible[]` (generative)": keys(gen["infeasible"]),
        # `memory --json`: MemoryEstimate.to_dict() is asdict(); `validation` joins it under --validate
        "`memory --json`": {f.name for f in dataclasses.fields(MemoryEstimate)} | {"validation"},
        "`bench --json`": set(bench),
    }


def test_every_json_key_has_a_doc_line_and_every_doc_line_a_key(plans: dict[str, Obj], generative: Obj) -> None:
    documented = {head: set(fields) for head, fields in doc_tables().items()}
    real = actual(plans, generative)
    assert set(documented) == set(real), "a table of docs/json.md the test does not check, or one it lost"
    for head, got in real.items():
        assert got - documented[head] == set(), f"docs/json.md, {head}: keys printed but not documented"
        assert documented[head] - got == set(), f"docs/json.md, {head}: keys documented but not printed"


def test_a_candidate_field_is_null_outside_the_kinds_its_doc_line_names(plans: dict[str, Obj]) -> None:
    table = doc_tables()["Candidate row"]
    filled = {name: {k for k in KINDS if k in cells[2]} if cells[2] != "all" else set(KINDS)
              for name, cells in table.items()}  # fmt: skip
    assert all(filled.values()), "every field's 'filled for' cell names a kind or says all"
    seen: dict[str, set[str]] = {}
    for name, d in plans.items():
        for row in rows_of(d):
            for field, value in row.items():
                assert field in filled, f"{field}: no line in docs/json.md's Candidate row table"
                if value is not None:
                    seen.setdefault(field, set()).add(d["kind"])
                    assert d["kind"] in filled[field], f"{field} is filled in a {name} plan's row: {value!r}"
    assert {"online", "batch", "training", "rules"} == {d["kind"] for d in plans.values()}
    # the kinds named are the kinds that fill it in these plans (rules: no batching, energy or spin-up)
    for field in ("latency_ms", "cost_usd_per_1m_requests", "runtime_hours", "spot", "idle", "time_to_train_hours"):
        assert seen[field] == filled[field], field
