"""`rightsize report RUN` renders the plan RUN names: exact ids win, an ambiguous prefix is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from rightsize.errors import NotFoundError, SpecError
from rightsize.report.stored import find_generative_plan, find_plan
from rightsize.store import Store


def _store_with_plans(tmp_path: Path, n: int) -> tuple[Store, list[dict]]:  # type: ignore[type-arg]
    st = Store(tmp_path / "s.sqlite")
    for i in range(n):
        st.save_artifact(None, "plan", {"name": f"plan-{i}", "model": "m"})
    return st, st.artifacts(kind="plan")


def test_exact_run_id_beats_an_artifact_id_prefix(tmp_path: Path) -> None:
    st, plans = _store_with_plans(tmp_path, 2)
    # a run id that is also a prefix of the other plan's artifact id: the run's own plan must win
    with st._tx() as c:
        c.execute("UPDATE artifacts SET id = ? WHERE id = ?", (plans[1]["run_id"] + "ff", plans[0]["id"]))
    plans = st.artifacts(kind="plan")
    wanted = next(a for a in plans if a["run_id"] == plans[1]["run_id"])
    assert find_plan(st, plans[1]["run_id"])["id"] == wanted["id"]


def test_unique_prefix_finds_and_ambiguous_prefix_is_refused(tmp_path: Path) -> None:
    st, plans = _store_with_plans(tmp_path, 3)
    one = plans[0]
    assert find_plan(st, one["run_id"][:8])["id"] == one["id"]
    with st._tx() as c:  # make two plans share a prefix
        c.execute(
            "UPDATE artifacts SET id = 'abcd' || substr(id, 5) WHERE id IN (?, ?)", (plans[0]["id"], plans[1]["id"])
        )
    with pytest.raises(SpecError, match="matches 2 plans"):
        find_plan(st, "abcd")
    with pytest.raises(NotFoundError):
        find_plan(st, "zzzz")
    with pytest.raises(SpecError, match=r"^run: 'abc' is too short for a prefix; give 4 or more characters"):
        find_plan(st, "abc")  # it said "no plan with run or artifact id 'abc'", as results does not


def test_a_generative_plan_is_found_by_its_id_its_prefix_or_as_the_newest_plan(tmp_path: Path) -> None:
    st, plans = _store_with_plans(tmp_path, 1)
    gen = st.save_artifact(None, "generative-plan", {"name": "chat", "model": "llama-7b"})
    run = st.artifacts(kind="generative-plan")[0]["run_id"]
    for ref in (gen, run, run[:8], None):  # the newest plan of either kind
        found = find_generative_plan(st, ref)
        assert found is not None and found["id"] == gen
    assert find_generative_plan(st, plans[0]["run_id"]) is None  # a classic plan's id is the classic report's
    assert find_plan(st)["id"] == plans[0]["id"]


def test_a_store_of_generative_plans_only_says_so_not_that_it_holds_no_plan(tmp_path: Path) -> None:
    st = Store(tmp_path / "gen.db")
    st.save_artifact(None, "generative-plan", {"name": "chat", "model": "llama-7b"})
    run = st.artifacts(kind="generative-plan")[0]["run_id"]
    with pytest.raises(NotFoundError, match=rf"generative plans only \(newest: run {run}, chat\)"):
        find_plan(st)


def test_a_run_of_another_kind_is_named_as_such(tmp_path: Path) -> None:
    st, _ = _store_with_plans(tmp_path, 1)
    bench = st.start_run("bench", name="quick", model="distilbert")
    with pytest.raises(SpecError, match=rf"^run: '{bench}' is a bench run \(quick\), not a plan; .*results {bench}"):
        find_plan(st, bench)
