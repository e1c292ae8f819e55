"""The report and the dashboard in a real headless Chromium (Playwright driving Debian's chromium).

`make browser` (a dependency of `make test`) installs Debian's chromium with apt-get when /usr/bin/chromium
is missing (Playwright cannot download browsers here); without it the tests skip, saying so. Screenshots
are saved under artifacts/screenshots/ (gitignored) for a person to look at.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from report_kit import MEMORY, XSS, build_store, curves, fake_sweep, online_plan, profile_for, training_plan

from rightsize.catalog import load_catalog
from rightsize.report import write_report
from rightsize.report.dashboard import running_dashboard

pytestmark = [pytest.mark.browser]

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip
SHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"
COUNT_PTS = "() => Object.fromEntries([...document.querySelectorAll('[data-chart]')].map(f => [f.dataset.chart, f.querySelectorAll('.pt').length]))"  # noqa: E501


@pytest.fixture(scope="session")
def chromium() -> str:
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"no Chromium at {CHROMIUM}: run `make browser` (apt-get install -y chromium, as root)")
    return CHROMIUM


@pytest.fixture(scope="module")
def browser(chromium: str) -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=chromium, args=ARGS)
        yield b
        b.close()


class Watched:
    """A page that records console errors, uncaught exceptions and dialogs (alert() must never fire)."""

    def __init__(self, browser: Any) -> None:
        self.page = browser.new_page(viewport={"width": 1300, "height": 900})
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("dialog", self._dialog)

    def _dialog(self, d: Any) -> None:
        self.dialogs.append(d.message)
        d.dismiss()

    def points(self) -> dict[str, int]:
        return dict(self.page.evaluate(COUNT_PTS))

    def shot(self, name: str) -> Path:
        SHOTS.mkdir(parents=True, exist_ok=True)
        path = SHOTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        assert path.stat().st_size > 10_000
        return path


@pytest.fixture
def watched(browser: Any) -> Iterator[Watched]:
    w = Watched(browser)
    yield w
    w.page.close()


def test_online_report_draws_every_chart_offline(watched: Watched, tmp_path: Path) -> None:
    path = write_report(online_plan(), tmp_path / "online.html", profile=profile_for(), curves=curves(), memory=MEMORY,
                        sweep=fake_sweep)  # fmt: skip
    requests: list[str] = []
    watched.page.on("request", lambda r: requests.append(r.url))
    watched.page.goto(path.as_uri())
    pts = watched.points()
    assert list(pts) == ["latency-batch", "throughput-batch", "p95-rate", "pareto", "memory"]
    assert all(n > 0 for n in pts.values()), pts
    assert watched.page.locator("[data-chart] svg").count() == 5
    box = watched.page.locator('[data-chart="pareto"] svg').bounding_box()
    assert box is not None and box["width"] > 300 and box["height"] > 150  # drawn, not collapsed
    assert watched.page.locator("text=2 × c7i.2xlarge").first.is_visible()
    watched.shot("report-online")
    assert watched.errors == [] and watched.dialogs == []
    assert requests == [path.as_uri()]  # offline: the page fetched nothing but itself
    watched.page.set_viewport_size({"width": 390, "height": 800})  # a phone: the 480 px chart columns had scrolled
    wide = watched.page.evaluate("document.documentElement.scrollWidth")  # every report sideways to 508 px
    assert wide <= 390, wide


def test_training_report_draws_cluster_and_spot_charts(watched: Watched, tmp_path: Path) -> None:
    path = write_report(training_plan(), tmp_path / "training.html", memory=MEMORY)
    watched.page.goto(path.as_uri())
    pts = watched.points()
    assert {"pareto", "memory", "cluster-time", "cluster-cost", "spot-cost", "spot-time"} <= pts.keys()
    assert all(n > 0 for n in pts.values()), pts
    watched.shot("report-training")
    assert watched.errors == []


def test_script_in_a_model_name_renders_as_text(watched: Watched, tmp_path: Path) -> None:
    plan = online_plan(model=XSS, workload=XSS)
    path = write_report(plan, tmp_path / "xss.html", profile=profile_for(model=XSS), sweep=fake_sweep)
    watched.page.goto(path.as_uri())
    assert watched.page.locator("h1").inner_text() == f"rightsize: {XSS}"
    assert watched.page.locator("script").count() == 0
    assert watched.dialogs == [] and watched.errors == []


def test_dashboard_compares_two_machines_side_by_side(watched: Watched, tmp_path: Path) -> None:
    store = tmp_path / "store.sqlite"
    a, b = build_store(store)
    with running_dashboard(store, catalog=load_catalog("")) as url:
        page = watched.page
        page.goto(url + "/")
        button = page.locator("#compare-btn")
        assert button.is_disabled()  # fewer than two runs picked
        page.check(f'input[value="{a}"]')
        page.check(f'input[value="{b}"]')
        assert button.is_enabled()
        watched.shot("dashboard-runs")
        with page.expect_navigation():
            button.click()
        assert "/compare?" in page.url
        cols = page.locator(".compare-col")
        assert cols.count() == 2
        hosts = sorted(cols.nth(i).locator("h3").inner_text().split(" · ")[1] for i in range(2))
        assert hosts == ["box-a", "box-b"]  # one column per machine
        left, right = cols.nth(0).bounding_box(), cols.nth(1).bounding_box()
        assert left is not None and right is not None and right["x"] > left["x"] + left["width"] - 1  # side by side
        pts = watched.points()
        assert pts["compare-latency"] == 21 and pts["compare-throughput"] == 21
        watched.shot("dashboard-compare")
    assert watched.errors == [] and watched.dialogs == []


def test_dashboard_filter_changes_the_view(watched: Watched, tmp_path: Path) -> None:
    store = tmp_path / "store.sqlite"
    build_store(store)
    with running_dashboard(store, catalog=load_catalog("")) as url:
        page = watched.page
        page.goto(url + "/cost")
        before = watched.points()
        assert before["cost-planned"] == 8 and before["cost-measured"] > 0
        with page.expect_navigation():
            page.select_option('select[name="device_class"]', "gpu")  # the page's script submits on change
        assert "device_class=gpu" in page.url
        after = watched.points()
        assert after["cost-planned"] == 4 and 0 < after["cost-measured"] < before["cost-measured"]
        classes = page.eval_on_selector_all(
            "[data-chart] .pt", "els => [...new Set(els.map(e => e.dataset.deviceClass))]"
        )
        assert classes == ["gpu"]
        watched.shot("dashboard-cost-gpu")
    assert watched.errors == []


def test_dashboard_tables_sort_and_filter(watched: Watched, tmp_path: Path) -> None:
    store = tmp_path / "store.sqlite"
    a, _ = build_store(store)
    with running_dashboard(store, catalog=load_catalog("")) as url:
        page = watched.page
        page.goto(url + f"/run/{a}")
        table = page.locator("table[data-table]").first
        rows = table.locator("tbody tr")
        total = rows.count()
        assert total > 2
        heads = [h.strip().lower() for h in table.locator("thead th").all_inner_texts()]
        col = next(i for i, h in enumerate(heads) if h.startswith("batch"))

        def column() -> list[float]:
            return [float(rows.nth(i).locator("td").nth(col).inner_text()) for i in range(total)]

        header = table.locator("thead th").nth(col)
        header.click()
        assert column() == sorted(column())
        header.click()  # again: descending
        assert column() == sorted(column(), reverse=True)
        first_up = [rows.nth(i).inner_text() for i in range(total)]
        needle = first_up[0].split("\t")[0] if "\t" in first_up[0] else first_up[0].split()[0]
        page.locator("input.table-filter").first.fill(needle)
        visible = table.locator("tbody tr:not([hidden])").count()
        assert visible >= 1 and all(
            needle.lower() in t.lower() for t in table.locator("tbody tr:not([hidden])").all_inner_texts()
        )
        page.locator("input.table-filter").first.fill("no row contains this text")
        assert table.locator("tbody tr:not([hidden])").count() == 0
        watched.shot("dashboard-table-filter")
    assert watched.errors == []


def test_dashboard_escapes_a_script_model_name(watched: Watched, tmp_path: Path) -> None:
    store = tmp_path / "store.sqlite"
    build_store(store, model=XSS)
    with running_dashboard(store, catalog=load_catalog("")) as url:
        for path in ("/", "/cost"):
            watched.page.goto(url + path)
            assert XSS in watched.page.locator("main").inner_text()
        watched.page.goto(url + "/")
        with watched.page.expect_navigation():
            watched.page.locator('a[href^="/report/"]').first.click()
        assert f"model {XSS}" in watched.page.locator("header").inner_text()
    assert watched.dialogs == [] and watched.errors == []


def test_dashboard_serves_a_generative_plans_report(watched: Watched, tmp_path: Path) -> None:
    """A generative plan's report under the dashboard (its CSP, no console errors), every chart drawn, phone-wide."""
    from rightsize.cli.app import main
    from rightsize.store import Store

    db = tmp_path / "s.db"
    with pytest.raises(SystemExit):
        main(["plan", "examples/llama-1b-int8-assistant.yaml", "--json", "--store", str(db)])
    (art,) = Store(db).artifacts(kind="generative-plan")
    with running_dashboard(db) as url:
        watched.page.goto(f"{url}/run/{art['run_id']}")
        watched.page.locator("text=Full report").click()
        watched.page.wait_for_load_state()
        pts = watched.points()
        assert list(pts) == ["ttft-rate", "tpot-rate", "tokens-concurrency"] and all(n > 0 for n in pts.values())
        watched.shot("dashboard-generative-report")
        watched.page.set_viewport_size({"width": 390, "height": 800})
        wide = watched.page.evaluate("document.documentElement.scrollWidth")
    assert wide <= 390, wide
    assert watched.errors == [] and watched.dialogs == []
