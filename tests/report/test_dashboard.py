"""The dashboard over HTTP without a browser: pages, comparison, filters, read-only, pricing."""

from __future__ import annotations

import json
import re
import socket
import struct
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from report_kit import ENV_A, ENV_B, GIB

from rightsize.errors import NotFoundError, RightsizeError, SpecError
from rightsize.profile import Environment, Gpu
from rightsize.report.dashboard import running_dashboard
from rightsize.report.pricing import match_accelerator, price_env, usd_per_1m_samples


def _get(url: str, method: str = "GET") -> tuple[int, str]:
    req = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def _points(html: str, chart: str) -> list[str]:
    m = re.search(rf'data-chart="{chart}">(.*?)</figure>', html, re.S)
    assert m, f"chart {chart} not drawn"
    return re.findall(r'<(?:circle|rect|polygon) class="pt"[^>]*>', m.group(1))


def test_index_lists_runs_environments_and_plans(two_run_store: tuple[Path, str, str]) -> None:
    path, a, b = two_run_store
    with running_dashboard(path) as url:
        status, html = _get(url + "/")
    assert status == 200
    assert f'value="{a}"' in html and f'value="{b}"' in html  # compare checkboxes
    assert "AMD EPYC 9B14 (test A)" in html and "NVIDIA A10G" in html  # both environments
    assert html.count('href="/report/') == 2  # one plan per machine


def test_an_empty_store_says_how_to_fill_it_instead_of_header_only_tables(tmp_path: Path) -> None:
    from rightsize.store import Store

    with Store(tmp_path / "empty.sqlite"):
        pass
    with running_dashboard(tmp_path / "empty.sqlite") as url:
        status, html = _get(url + "/")
    assert status == 200 and "<table" not in html
    assert "No run stored yet: <code>rightsize bench SPEC</code>" in html and "No plan stored yet" in html


def test_compare_puts_two_machines_side_by_side(two_run_store: tuple[Path, str, str]) -> None:
    path, a, b = two_run_store
    with running_dashboard(path) as url:
        status, html = _get(f"{url}/compare?run={a}&run={b}")
    assert status == 200
    cols = re.findall(r'<div class="compare-col" data-run="(\w+)">', html)
    assert cols == [a, b]
    assert "box-a" in html and "box-b" in html
    # fp32 b8 on box-b: 20 + 12 * 7 = 104 ms vs box-a 40 + 30 * 7 = 250 ms -> 250/104 = 2.40x the throughput
    assert "×2.40" in html
    assert len(_points(html, "compare-latency")) == 8 + 13  # box-a: 8 cpu points; box-b: 8 cpu + 5 cuda


def test_compare_needs_two_runs(two_run_store: tuple[Path, str, str]) -> None:
    path, a, _ = two_run_store
    with running_dashboard(path) as url:
        _, html = _get(f"{url}/compare?run={a}")
    assert "Pick at least two runs" in html


def test_cost_filters_change_the_points(two_run_store: tuple[Path, str, str]) -> None:
    from rightsize.catalog import load_catalog

    path, _, _ = two_run_store
    with running_dashboard(path, catalog=load_catalog("")) as url:
        _, all_ = _get(url + "/cost")
        _, gpu = _get(url + "/cost?device_class=gpu")
        _, aws_bf16 = _get(url + "/cost?provider=gcp&precision=fp32")
    planned_all, planned_gpu = _points(all_, "cost-planned"), _points(gpu, "cost-planned")
    assert len(planned_all) == 8 and len(planned_gpu) == 4  # 8 candidates, 4 of them GPUs
    assert all('data-device-class="gpu"' in p for p in planned_gpu)
    measured_gpu = _points(gpu, "cost-measured")
    assert len(measured_gpu) == 10  # 5 cuda batches x {g5.xlarge, g5.2xlarge} (single A10G)
    assert len(_points(aws_bf16, "cost-planned")) == 1  # n2-standard-8 fp32 on gcp
    assert 'data-chart-skipped="cost-measured"' not in all_
    assert '<option value="gpu" selected>' in gpu


def test_two_specs_planning_one_model_are_both_on_the_cost_page(two_run_store: tuple[Path, str, str]) -> None:
    from report_kit import online_plan

    from rightsize.store import Store

    path, _, _ = two_run_store
    with Store(path) as st:  # a second spec for the same model: its 8 candidates had replaced the first spec's
        run = st.start_run("plan", name="plan", model="distilbert")
        st.save_artifact(run, "plan", online_plan("distilbert", workload="sentiment-api").to_dict())
        st.finish_run(run)
    with running_dashboard(path) as url:
        _, html = _get(url + "/cost")
    assert len(_points(html, "cost-planned")) == 16
    chart = html.split('data-chart="cost-planned"')[1].split("</figure>")[0]
    assert chart.count("(sentiment-api)") == 8 and chart.count("(text-classification-api)") == 8


def test_run_and_report_pages_and_errors(two_run_store: tuple[Path, str, str]) -> None:
    path, a, _ = two_run_store
    with running_dashboard(path) as url:
        s_run, run = _get(f"{url}/run/{a}")
        _, index = _get(url + "/")
        report_id = re.findall(r'href="/report/(\w+)"', index)[0]
        s_rep, rep = _get(f"{url}/report/{report_id}")
        s_missing, missing = _get(f"{url}/run/nope")
        s_404, _ = _get(url + "/no/such/page")
        s_post, _ = _get(url + "/", method="POST")
    assert s_run == 200 and len(_points(run, "latency-batch")) == 16
    assert s_rep == 200 and "2 × c7i.2xlarge" in rep and 'data-chart="latency-batch"' in rep
    assert s_missing == 404 and "is not in the store" in missing
    assert (s_404, s_post) == (404, 405)


def test_other_methods_are_405_with_allow_and_two_hosts_are_400(two_run_store: tuple[Path, str, str]) -> None:
    import http.client
    from urllib.parse import urlsplit

    path, _, _ = two_run_store
    with running_dashboard(path) as url:
        port = urlsplit(url).port
        answers = {}
        for method in ("OPTIONS", "TRACE", "DELETE", "PROPFIND", "get"):  # no do_ handler: had been 501
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request(method, "/")
            r = conn.getresponse()
            answers[method] = (r.status, r.getheader("Allow"))
            conn.close()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.putrequest("GET", "/", skip_host=True)
        conn.putheader("Host", "127.0.0.1")
        conn.putheader("Host", "rebind.example")
        conn.endheaders()
        r = conn.getresponse()
        two_hosts = (r.status, r.read().decode())
        conn.close()
    assert answers == {m: (405, "GET, HEAD") for m in ("OPTIONS", "TRACE", "DELETE", "PROPFIND", "get")}
    assert two_hosts[0] == 400 and "more than one Host header" in two_hosts[1]


def test_dashboard_never_creates_a_store(tmp_path: Path) -> None:
    missing = tmp_path / "none.sqlite"
    with pytest.raises(NotFoundError, match="no results store"), running_dashboard(missing):
        pass
    assert not missing.exists()


def test_dashboard_refuses_a_non_store_and_a_bad_host_before_serving(
    tmp_path: Path, two_run_store: tuple[Path, str, str]
) -> None:
    junk = tmp_path / "junk.txt"
    junk.write_text("root:x:0:0\n")
    with pytest.raises(RightsizeError, match="not a rightsize store"), running_dashboard(junk):
        pass
    store = two_run_store[0]
    with pytest.raises(SpecError, match=r"^--host: is empty"), running_dashboard(store, host=""):
        pass
    with (
        pytest.raises(SpecError, match=r"^--host: cannot listen on '999\.1\.1\.1'"),
        running_dashboard(store, host="999.1.1.1"),
    ):
        pass


def test_gpu_names_match_catalog_accelerators() -> None:
    from rightsize.catalog import load_catalog

    accs = load_catalog("").accelerators
    assert match_accelerator(Gpu("NVIDIA A10G"), accs) == "A10G"
    assert match_accelerator(Gpu("NVIDIA A100-SXM4-80GB", 80 * GIB), accs) == "A100-80GB"
    assert match_accelerator(Gpu("NVIDIA A100-SXM4-40GB", 40 * GIB), accs) == "A100-40GB"
    assert match_accelerator(Gpu("NVIDIA H100 PCIe"), accs) == "H100-PCIe"
    assert match_accelerator(Gpu("Radeon"), accs) is None


def test_machines_are_priced_from_the_catalog() -> None:
    from rightsize.catalog import load_catalog

    cat = load_catalog()
    gpu = price_env(Environment.from_dict(ENV_B), "cuda", cat)
    assert [p.instance_type for p in gpu][:1] == ["g5.xlarge"]  # the cheapest single-A10G instance
    cpu = {p.provider: p.instance_type for p in price_env(Environment.from_dict(ENV_B), "cpu", cat)}
    assert cpu["aws"] in ("m7i.4xlarge", "r7i.4xlarge")  # sapphire rapids, 16 vCPUs, smallest
    assert price_env(Environment.from_dict(ENV_A), "cuda", cat) == []
    assert usd_per_1m_samples(1.006, 500.0) == pytest.approx(1.006 / 1.8e6 * 1e6)
    assert usd_per_1m_samples(1.0, 0.0) is None


def test_token_host_check_and_a_pinned_script(
    two_run_store: tuple[Path, str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    import base64
    import hashlib

    from rightsize.report.dashboard import CSP
    from rightsize.report.dashboard_views import SCRIPT

    path, _, _ = two_run_store
    with running_dashboard(path, token="t0k") as url:
        assert _get(url + "/")[0] == 401  # no token
        req = urllib.request.Request(url + "/?token=t0k")
        with urllib.request.urlopen(req, timeout=10) as r:
            assert r.status == 200
            cookie = r.headers["Set-Cookie"].split(";")[0]
            assert "'unsafe-inline'" not in r.headers["Content-Security-Policy"].split("script-src")[1].split(";")[0]
        req = urllib.request.Request(url + "/cost", headers={"Cookie": cookie})  # the cookie carries it on
        with urllib.request.urlopen(req, timeout=10) as r:
            assert r.status == 200
        # another app's cookies on 127.0.0.1 outside strict cookie syntax had hidden the token (401)
        for jar in (f'other={{"a":1}}; {cookie}', f"{cookie}; theme=dark mode"):
            with urllib.request.urlopen(
                urllib.request.Request(url + "/cost", headers={"Cookie": jar}), timeout=10
            ) as r:
                assert r.status == 200, jar
        assert _get(url + "/cost")[0] == 401  # and none at all is still refused
        status, body = _get(url + "/api/runs")  # JSON on the API, as its other errors (it was an HTML page)
        assert status == 401 and json.loads(body) == {"error": "open the URL with ?token=... (printed when the "
                                                      "dashboard started)"}  # fmt: skip
        parts = urllib.parse.urlsplit(url)
        for _ in range(3):  # a client that resets the connection before its answer is read
            with socket.create_connection((parts.hostname, parts.port)) as sock:
                sock.sendall(b"GET /?token=t0k HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST, not FIN
        assert _get(url + "/?token=t0k")[0] == 200  # the server serves on
        req = urllib.request.Request(url + "/?token=t0k", headers={"Host": "rebind.example"})
        try:
            urllib.request.urlopen(req, timeout=10)
            raise AssertionError("foreign Host was served")
        except urllib.error.HTTPError as e:
            assert e.code == 421
    assert "Traceback" not in capsys.readouterr().err  # it had printed ConnectionResetError's
    digest = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in CSP


@pytest.mark.slow  # > 1.2 s: make test runs it, make test-fast skips it
def test_index_lists_generative_plans_apart_from_the_other_plans(tmp_path: Path) -> None:
    from rightsize.cli.app import main
    from rightsize.store import Store

    db = tmp_path / "s.db"
    with pytest.raises(SystemExit):
        main(["plan", "examples/llama-70b-chat.yaml", "--json", "--store", str(db)])
    (art,) = Store(db).artifacts(kind="generative-plan")
    rec = art["payload"]["recommendation"]
    with running_dashboard(db) as url:
        status, html = _get(url + "/")
    assert status == 200
    section = re.search(r"<h2>Generative plans</h2>(.*?)</section>", html, re.S)
    assert section is not None and f"{rec['instances']} x {rec['instance']}" in section.group(1)
    assert f"tp {rec['tp']}" in section.group(1) and f"{rec['usd_per_m_output_tokens']:.2f}" in section.group(1)
    assert f'<a href="/report/{art["id"]}">{art["id"]}</a>' in section.group(1)  # its id opens its report
    assert "No plan stored yet" in html  # not counted among the online/batch/training plans
    # its run page shows the plan itself (it has no measurements or environment to show)
    with running_dashboard(db) as url:
        status, page = _get(url + f"/run/{art['run_id']}")
    assert status == 200 and f"{rec['instances']} x {rec['instance']}" in page
    table = re.search(r'data-table="generative-candidates".*?</table>', page, re.S)
    assert table is not None and table.group(0).count("<tr>") == len(art["payload"]["candidates"]) + 1
    # and links its full report, which /report/ID serves with the charts `rightsize report ID` writes (it had
    # answered 404: the dashboard looked for an online/batch/training plan only)
    assert f'href="/report/{art["id"]}"' in page
    with running_dashboard(db) as url:
        status, report = _get(url + f"/report/{art['id']}")
    assert status == 200 and "generative serving plan" in report
    for chart in ("ttft-rate", "tpot-rate", "tokens-concurrency"):
        assert f'data-chart="{chart}"' in report


def test_load_test_and_validation_runs_show_their_results(tmp_path: Path) -> None:
    from rightsize.store import Store

    st = Store(tmp_path / "s.db")
    lt = st.start_run("loadtest", name="loadtest")
    st.save_artifact(lt, "loadtest", {
        "kind": "loadtest", "url": "http://127.0.0.1:9/v1/predict", "mode": "open", "arrival": "poisson",
        "offered_rate_per_s": 5.0, "achieved_rate_per_s": 4.9, "requests_sent": 40, "responses_ok": 39,
        "latency_ms": {"p50": 126.8, "p90": 137.2, "p95": 154.9, "p99": 225.7, "max": 230.0},
        "send_lag_ms": {"p99": 1.2}, "errors": {"timeout": 1}, "valid": True, "problems": [],
    })  # fmt: skip
    st.finish_run(lt)
    va = st.start_run("validate", name="api", model="distilbert")
    st.save_artifact(va, "validate", {
        "kind": "validate", "candidate": {"instance": "c6i.2xlarge", "device": "cpu", "precision": "int8",
                                          "max_batch": 4, "max_wait_ms": 2.0},
        "points": [{"label": "planned", "rate_per_s": 10.0, "utilization": 0.12,
                    "predicted_ms": {"p50": 14.3, "p95": 22.6, "p99": 25.8},
                    "measured_ms": {"p50": 14.0, "p95": 22.0, "p99": 24.9},
                    "error_pct": {"p50": -1.9, "p95": -2.8, "p99": -3.4}}],
    })  # fmt: skip
    st.finish_run(va)
    with running_dashboard(tmp_path / "s.db") as url:
        _, lt_page = _get(url + f"/run/{lt}")
        _, va_page = _get(url + f"/run/{va}")
    assert "127 / 137 / 155 / 226 / 230" in lt_page and "timeout: 1" in lt_page
    assert "<h2>Measurements</h2>" not in lt_page  # nothing measured by the run itself: no empty table
    table = re.search(r'data-table="validation".*?</table>', va_page, re.S)
    assert table is not None and "14.3 / 22.6 / 25.8" in table.group(0) and "-2% / -3% / -3%" in table.group(0)
    assert "c6i.2xlarge (cpu, int8), max batch 4" in va_page


def _kv(page: str, key: str) -> str:
    """The value the run page's key-value list shows for ``key``."""
    got = re.search(rf"<dt>{re.escape(key)}</dt><dd>(.*?)</dd>", page)
    assert got is not None, key
    return got.group(1)


def test_a_generation_load_test_shows_ttft_tpot_and_tokens_per_s(tmp_path: Path) -> None:
    """A ``loadtest --generate`` payload (TTFT/TPOT, no request latency) had shown "?" and "-" in every row."""
    import math

    from rightsize.llm.loadgen import GenLoadResult, GenResult
    from rightsize.loadgen.persist import save_result
    from rightsize.store import Store

    # six answered requests (TTFT 40..90 ms, TPOT 20..120 ms), one timed out, one refused (503): the client's summary
    ok = [GenResult(0.1 * i, 0.1 * i + 0.001, 0.1 * i + 0.04 + 0.01 * i, 0.1 * i + 0.04 + 0.01 * i + 0.16 * (i + 1),
                    9, 200) for i in range(6)]  # fmt: skip
    bad = [GenResult(0.7, 0.7, math.nan, math.nan, 0, 0, "TimeoutError (HTTP 200)"),
           GenResult(0.8, 0.8, math.nan, math.nan, 0, 503, detail="queue full")]  # fmt: skip
    summary = GenLoadResult(ok + bad, 2.0).summary()
    # the payload `rightsize loadtest URL --generate` stores (cli.loadtest._generate_load), stored the same way
    payload = {"kind": "loadtest-generate", "url": "http://127.0.0.1:8000", "rate_per_s": 4.0,
               "prompt_tokens": [32, 256], "output_tokens": [9, 9], **summary}  # fmt: skip
    art = save_result(payload, tmp_path / "s.db")
    (a,) = Store(tmp_path / "s.db").artifacts(kind="loadtest")
    with running_dashboard(tmp_path / "s.db") as url:
        status, page = _get(url + f"/run/{a['run_id']}")
    assert status == 200 and f"Generation load test {art}" in page
    assert _kv(page, "target") == "http://127.0.0.1:8000"
    assert _kv(page, "load") == "open loop, poisson; prompts 32-256, outputs 9 tokens"
    assert _kv(page, "offered rate") == "4 req/s (send lag p99 1 ms)"
    assert _kv(page, "sent / answered") == "8 / 6"
    assert _kv(page, "TTFT p50 / p95 / p99 (ms)") == "65 / 87.5 / 89.5"
    assert _kv(page, "TPOT p50 / p95 / p99 (ms)") == "70 / 115 / 119"
    assert _kv(page, "output tokens/s") == "27"
    assert _kv(page, "errors") == "TimeoutError (HTTP 200): 1, HTTP 503: 1"
    assert _kv(page, "valid") == "no: 2 of 8 requests unanswered"
    section = re.search(r"<h2>Generation load test.*?</section>", page, re.S)
    assert section is not None and "?" not in section.group(0)
    assert "latency p50" not in page and "<h2>Measurements</h2>" not in page


def test_a_generative_validation_shows_predicted_vs_measured_ttft_and_tpot(tmp_path: Path) -> None:
    """A generative ``validate`` report (levels of TTFT/TPOT, no latency points) had shown an empty table."""
    from rightsize.loadgen.persist import save_result
    from rightsize.store import Store
    from rightsize.workflows.validate_generate import QUANTITIES, render_generative, summarise

    def level(busy: float, rate: float, meas: list[float], fc: list[float], sv: list[float]) -> dict[str, object]:
        m, f, s = (dict(zip(QUANTITIES, v, strict=True)) for v in (meas, fc, sv))

        def err(pred: dict[str, float]) -> dict[str, float]:  # validate_generative's error: (pred - meas) / meas
            return {q: round(100.0 * (pred[q] - m[q]) / m[q], 1) for q in QUANTITIES}

        return {"level_busy": busy, "rate_per_s": rate, "requests": 40, "valid": True, "duration_s": 10.0,
                "recorded": 34, "thin": False, "send_lag_p99_ms": 0.8, "measured": m, "forecast": f | {"busy": busy},
                "served": s | {"busy": busy}, "forecast_err_pct": err(f), "served_err_pct": err(s)}  # fmt: skip

    # validate_generative's report shape, with what `rightsize validate` adds before storing it
    report: dict[str, object] = {
        "model": "gpt2", "size": "small", "engine": {}, "overhead_ms": 3.25, "per_token_ms": 0.412,
        "costs": {"p0": 1.0, "p1": 0.01, "p2": 1e-6, "d0": 2.0, "d1": 0.1, "d2": 1e-4, "prefill_residual": 0.05,
                  "decode_residual": 0.04},
        "overheads": {"n": 16.0, "ttft_ms": 3.25, "tpot_ms": 0.412, "ttft_iqr_ms": 0.5, "tpot_iqr_ms": 0.05},
        "levels": [level(0.3, 2.5, [41.0, 60.0, 12.5], [40.0, 66.0, 12.0], [42.0, 63.0, 12.4]),
                   level(0.85, 7.25, [80.0, 200.0, 20.0], [88.0, 180.0, 21.0], [82.0, 190.0, 20.2])],
    }  # fmt: skip
    report |= {"kind": "validate-generative", "spec": "chat", "served_model": "gpt2 small", "stand_in": True,
               "notes": ["weight_precision int8 is not served here"],
               "forecast": summarise([report], "forecast"), "served": summarise([report], "served")}  # fmt: skip
    assert "fitted prefill" in render_generative(report)  # the shape the CLI prints
    art = save_result(report, tmp_path / "s.db", kind="validate")
    (a,) = Store(tmp_path / "s.db").artifacts(kind="validate")
    with running_dashboard(tmp_path / "s.db") as url:
        status, page = _get(url + f"/run/{a['run_id']}")
    assert status == 200 and f"Validation {art}" in page
    table = re.search(r'data-table="validation".*?</table>', page, re.S)
    assert table is not None and table.group(0).count("<tr>") == 3
    body = table.group(0)
    # predicted vs measured TTFT p50 / p95, TPOT p50 per level, the forecast's and the refit's errors
    assert "<td>30%</td><td>2.5</td><td>40</td><td>yes</td><td>40 / 66 / 12</td><td>41 / 60 / 12.5</td>" in body
    assert "<td>-2% / +10% / -4%</td><td>+2% / +5% / -1%</td>" in body
    assert "<td>85%</td><td>7.25</td><td>40</td><td>yes</td><td>88 / 180 / 21</td><td>80 / 200 / 20</td>" in body
    assert "<td>+10% / -10% / +5%</td><td>+2% / -5% / +1%</td>" in body
    assert "?" not in body and "<td>-</td>" not in body
    assert "spec chat, served gpt2 small (a stand-in)" in page and "per-request overhead 3.25 ms" in page
    assert "forecast: median |error| 7.5%, worst 10%, within 20%: 6/6" in page
    assert "weight_precision int8 is not served here" in page


def test_a_tiny_variant_is_priced_apart_from_the_model_with_its_input(tmp_path: Path) -> None:
    """The tiny distilbert (tests, --tiny) at seq_len 8 headed /cost's measured table as "distilbert c7a.large b2",
    $0.011 per 1M samples, beside the real model's 50 ms at seq_len 64."""
    from dataclasses import replace

    from report_kit import measurement

    from rightsize.catalog import load_catalog
    from rightsize.report.dashboard_cost import measured_points
    from rightsize.store import Store

    with Store(tmp_path / "s.sqlite") as st:
        st.save_env(ENV_B)
        run = st.start_run("bench", name="b", model="distilbert", env_id=str(ENV_B["id"]))
        real = measurement("distilbert", "cpu", "fp32", 2, 40.0, 30.0, str(ENV_B["id"]))
        tiny = replace(real, tiny=True, input={"seq_len": 8}, latency_ms=replace(real.latency_ms, p95=0.85))
        st.add_measurements(run, [real, tiny])
        st.finish_run(run)
        points = measured_points(st, load_catalog(""))
    by_model = {p.model: p for p in points}
    assert set(by_model) == {"distilbert", "distilbert (tiny)"}, set(by_model)
    assert by_model["distilbert (tiny)"].label.endswith("b2, seq_len 8") and by_model["distilbert"].label.endswith(
        "b2, seq_len 64"
    )


def test_a_stored_generative_plans_cpu_rows_show_no_tensor_parallel_degree(tmp_path: Path) -> None:
    """A CPU row of a stored generative plan read "tp 1" (older plans stored 1) and, once --json wrote null, would
    have read "None": a CPU replica has no tensor parallelism."""
    from rightsize.report.dashboard_views import _generative_run
    from rightsize.store import Store

    st = Store(tmp_path / "s.db")
    run = st.start_run("plan", name="chat")
    row = {"device": "intel-sapphire-rapids", "device_class": "cpu", "replicas": 1, "usd_per_hour": 8.57,
           "ttft_ms": 753.0, "tpot_ms": 40.0, "usd_per_m_output_tokens": 476.0, "meets": True}  # fmt: skip
    cands = [row | {"instance": "c7i.48xlarge", "tp": None}, row | {"instance": "c7i.12xlarge", "tp": 1},
             row | {"instance": "p5.48xlarge", "device": "H100", "device_class": "gpu", "tp": 2}]  # fmt: skip
    st.save_artifact(run, "generative-plan", {"name": "chat", "recommendation": None, "candidates": cands,
                                              "infeasible": [], "notes": []})  # fmt: skip
    page = _generative_run(st, run, "chat", "now")
    tps = re.findall(r"<tr><td>([\w.]+)</td><td>[\w-]+</td><td>([^<]*)</td>", page)
    assert tps == [("c7i.48xlarge", "-"), ("c7i.12xlarge", "-"), ("p5.48xlarge", "2")], page
