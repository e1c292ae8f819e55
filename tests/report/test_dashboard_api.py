"""The dashboard's JSON API and CSV export (a real HTTP server over a real store), and its table script."""

from __future__ import annotations

import csv
import io
import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from rightsize.report.dashboard import CSP, running_dashboard
from rightsize.report.dashboard_views import SCRIPT


def _get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.headers["Content-Type"], r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers["Content-Type"], e.read().decode()


def test_runs_measurements_and_plans_as_json_and_csv(two_run_store: tuple[Path, str, str]) -> None:
    path, a, b = two_run_store
    with running_dashboard(path) as url:
        status, ctype, body = _get(url + "/api/runs")
        assert status == 200 and ctype == "application/json"
        runs = json.loads(body)
        assert {a, b} <= {r["id"] for r in runs}
        status, _, body = _get(url + f"/api/runs/{a}")
        run = json.loads(body)
        assert status == 200 and run["id"] == a and run["measurements"]
        first = run["measurements"][0]
        assert {"p50_ms", "p95_ms", "precision", "batch_size", "extra"} <= first.keys()
        status, ctype, body = _get(url + f"/api/runs/{a}?format=csv")
        rows = list(csv.DictReader(io.StringIO(body)))
        assert status == 200 and ctype.startswith("text/csv") and len(rows) == len(run["measurements"])
        assert json.loads(rows[0]["extra"]) == first["extra"]  # the extra column survives, as JSON
        status, _, body = _get(url + "/api/plans")
        plans = json.loads(body)
        assert status == 200 and len(plans) == 2 and all(p["instance"] for p in plans)
        status, _, body = _get(url + f"/api/plans/{plans[0]['id']}")
        assert status == 200 and json.loads(body)["payload"]["candidates"]
        whole = json.loads(body)
        for ref in (plans[0]["id"][:6], whole["run_id"], whole["run_id"][:6]):  # as /report/ takes them (had 404)
            status, _, body = _get(url + f"/api/plans/{ref}")
            assert status == 200 and json.loads(body)["id"] == plans[0]["id"]
        status, ctype, body = _get(url + "/api/plans/nope")
        assert status == 404 and ctype == "application/json" and "nope" in json.loads(body)["error"]
        status, _, body = _get(url + "/api/nothing")
        assert status == 404 and "/api/runs" in json.loads(body)["error"]
        status, ctype, html = _get(url + "/")
        assert 'href="/api/runs"' in html  # the pages link to it


def test_table_script_sorts_and_filters_and_is_pinned() -> None:
    assert "table[data-table]" in SCRIPT and "sort" in SCRIPT and "filter rows" in SCRIPT
    import base64
    import hashlib

    digest = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
    assert f"'sha256-{digest}'" in CSP  # the CSP allows exactly this script


def test_a_query_value_the_dashboard_does_not_know_is_a_400_naming_it(two_run_store: tuple[Path, str, str]) -> None:
    """``/cost?cost=bogus`` drew the per-1M chart; ``?format=xml`` and a csv of the plans answered json, as if asked."""
    path = two_run_store[0]
    with running_dashboard(path) as url:
        status, ctype, body = _get(url + "/api/measurements?format=xml")
        assert status == 400 and ctype == "application/json"
        error = json.loads(body)["error"]
        assert error == "format: unknown 'xml'; use json, or csv on /api/measurements and /api/runs/ID"
        status, _, body = _get(url + "/api/plans?format=csv")
        assert status == 400 and "gives json only" in json.loads(body)["error"]
        for fmt in ("csv", "CSV"):
            status, ctype, _ = _get(url + f"/api/measurements?format={fmt}")
            assert status == 200 and ctype.startswith("text/csv")
        status, _, html = _get(url + "/cost?cost=bogus")
        assert status == 400 and "cost: unknown &#x27;bogus&#x27;; use one of per1m, hour" in html
        status, _, html = _get(url + "/cost?cost=hour")
        assert status == 200 and "USD per hour" in html
        status, _, html = _get(url + "/cost?device_class=tpu")
        assert status == 400 and "device_class: no stored point has &#x27;tpu&#x27;; use one of cpu, gpu" in html


@pytest.mark.slow  # ~3 s on 2 cores: kept out of make test-fast
def test_generative_plans_are_listed_and_served_with_the_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """/api/plans answered [] after `rightsize plan llama-7b-chat.yaml`, and /api/plans/ID 404, though /run/ID and
    /report/ID showed the plan: it is stored under its own kind."""
    from cli_kit import run_cli

    store = tmp_path / "s.sqlite"
    code, _, err = run_cli(["plan", "examples/llama-7b-chat.yaml", "--store", str(store)], capsys)
    assert code == 0, err
    with running_dashboard(store) as url:
        status, _, body = _get(url + "/api/plans")
        [plan] = json.loads(body)
        assert status == 200 and plan["kind"] == "generative-plan" and plan["model"] == "llama-7b"
        assert (plan["instance"], plan["precision"], plan["feasible"]) == ("g5.xlarge", "fp16", True)
        assert plan["cost_usd_per_hour"] > 0
        status, _, body = _get(url + f"/api/plans/{plan['id']}")
        assert status == 200 and json.loads(body)["payload"]["recommendation"]["instance"] == "g5.xlarge"
        status, _, body = _get(url + f"/api/plans/{json.loads(body)['run_id'][:5]}")
        assert status == 200 and json.loads(body)["id"] == plan["id"]
