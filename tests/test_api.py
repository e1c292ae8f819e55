"""The Python API (rightsize.api): typed records over the same workflows the CLI runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from plan_fixtures import cpu_curve, gpu_curve, small_catalog

import rightsize.api as rs
from rightsize.errors import NotFoundError, SpecError, UnsupportedError
from rightsize.plan import plan
from rightsize.profile import Latency, Measurement

ROOT = Path(__file__).resolve().parents[1]
SPEC = {
    "name": "api", "model": "distilbert", "tiny": True,
    "targets": {"online": {"rate_per_s": 10, "latency": {"percentile": 95, "bound_ms": 80}}},
}  # fmt: skip


def _record() -> rs.PlanRecord:
    curves = [cpu_curve("c.2x", 20.0, 15.0), cpu_curve("c.4x", 11.0, 8.0), gpu_curve("T4", 4.0, 0.2)]
    return rs.PlanRecord(plan(rs.workload(SPEC), curves, small_catalog()))


def test_plan_record_tabulates_and_displays() -> None:
    record = _record()
    assert record.recommendation is not None and record.recommendation.instance == "c.2x"
    rows = record.rows()
    assert len(rows) == len(record.candidates) and rows[0]["rank"] == 1 and rows[0]["instance"] == "c.2x"
    assert rows[0]["p95_ms"] == pytest.approx(record.recommendation.latency.p95)  # type: ignore[union-attr]
    frame = record.to_dataframe()
    assert list(frame["instance"])[:1] == ["c.2x"] and len(frame) == len(rows)
    html = record._repr_html_()
    assert "<table>" in html and "c.2x" in html and "meets p95" in html
    assert "recommends" in repr(record)
    assert '"recommendation"' in record.to_json(top=3)


def test_plan_rows_name_the_engine() -> None:
    """With `engines: [torch, onnxruntime]` the recommendation was an ONNX Runtime plan and no row said so."""
    curves = [cpu_curve("c.2x", 20.0, 15.0)]
    assert {r["engine"] for r in _record().rows()} == {"torch"}
    ort = rs.PlanRecord(plan(rs.workload({**SPEC, "model": "ort:distilbert"}), curves, small_catalog()))
    assert ort.rows()[0]["engine"] == "onnxruntime" and list(ort.to_dataframe()["engine"])[:1] == ["onnxruntime"]
    assert "<th>engine</th>" in ort._repr_html_() and "<td>onnxruntime</td>" in ort._repr_html_()


def test_a_report_path_of_another_kind_names_the_argument(tmp_path: Path) -> None:
    """`record.report("out.pdf")` said "--report: must end in .html or .md": the CLI's option, not the argument."""
    with pytest.raises(SpecError, match=r"^path: must end in \.html or \.md, got '.*out\.pdf'$"):
        _record().report(tmp_path / "out.pdf")


def test_a_profile_shows_itself_short() -> None:
    """`repr(rs.measure(...))` was the dataclass's: every measurement's fields, 12.8 KB for 9 configs."""
    from rightsize.profile import Environment, Profile

    ms = tuple(_stored(p, b, "e1") for p in ("fp32", "int8") for b in (1, 4, 16, 32, 64, 128))
    profile = Profile("distilbert", "inference", {"seq_len": 16}, Environment("e1", cpu_model="Test CPU"), ms)
    assert repr(profile) == ("Profile('distilbert', inference, {'seq_len': 16}, 12 measurements (12 ok: cpu fp32 x6, "
                             "cpu int8 x6), env 'e1')")  # fmt: skip
    shown = profile._repr_html_()
    assert "distilbert inference {&#x27;seq_len&#x27;: 16} on Test CPU" in shown and "<th>p50_ms</th>" in shown
    assert shown.count("<tr>") == 1 + 12 and "more:" not in shown
    many = Profile(profile.model, profile.mode, profile.input, profile.env, ms * 2)
    assert many._repr_html_().count("<tr>") == 1 + 20 and "<i>4 more: .to_dataframe()</i>" in many._repr_html_()


def test_specs_from_dict_path_or_workload(tmp_path: Path) -> None:
    w = rs.workload(SPEC)
    assert rs.workload(w) is w
    path = tmp_path / "s.yaml"
    path.write_text("name: x\nmodel: resnet50\n")
    assert rs.workload(path).model == "resnet50"
    with pytest.raises(SpecError, match="targets"):
        rs.plan({"model": "resnet50"}, store=tmp_path / "s.db")
    # a name the zoo lacks is refused when the spec is read, as `rightsize plan` refuses it (it had passed here)
    with pytest.raises(NotFoundError, match=r"'resnet5' is not in the zoo\. Did you mean 'resnet50'"):
        rs.workload({**SPEC, "model": "resnet5"})
    path.write_text("name: x\nmodel: no-such-model\n")
    with pytest.raises(NotFoundError, match="not in the zoo"):
        rs.workload(path)
    assert rs.workload({**SPEC, "model": "ort:distilbert"}).model == "ort:distilbert"  # an engine's ref is no zoo name


@pytest.mark.slow
def test_example_script_runs_end_to_end(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, str(ROOT / "examples" / "python_api.py"), str(tmp_path / "store.sqlite")],
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr[-800:]
    assert "recommended: " in run.stdout and "measured configs" in run.stdout
    assert (tmp_path / "notebook-report.html").stat().st_size > 10_000
    # the plan is stored as the CLI stores it: `rightsize report ID` finds it (API plans had never been stored)
    plan_id = run.stdout.split("stored as plan ")[1].split(":")[0]
    argv = ["report", plan_id, "--store", str(tmp_path / "store.sqlite"), "--output", str(tmp_path / "again.md")]
    again = subprocess.run([sys.executable, "-m", "rightsize", *argv], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-500:]
    assert "notebook-sentiment" in (tmp_path / "again.md").read_text()


@pytest.mark.slow  # ~7 s on 2 cores: kept out of make test-fast
def test_a_script_without_the_main_guard_stops_at_once_and_says_why(tmp_path: Path) -> None:
    """A script calling rs.measure outside `if __name__ == "__main__":` hung for ever: the measuring child imported
    it again, called rs.measure there and waited on the store lock the parent held while the parent waited for it."""
    from rightsize.store import Store

    script = tmp_path / "unguarded.py"
    spec = {"name": "t", "model": "simplenet", "tiny": True, "batch_sizes": [1], "precisions": ["fp32"]}
    script.write_text(f"import rightsize as rs\nrs.measure({spec!r}, store={str(tmp_path / 's.db')!r})\n")
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 1
    assert (
        run.stderr.strip()
        .splitlines()[-1]
        .startswith(
            "rightsize.errors.SpecError: script: calls rightsize.plan or rightsize.measure outside "
            '`if __name__ == "__main__":`'
        )
    )
    with Store(tmp_path / "s.db", read_only=True) as st:  # not the config's fault: a guarded run measures it
        assert st.measurements() == []


def test_the_api_is_on_the_package_and_loads_lazily() -> None:
    code = (
        "import sys, rightsize; assert 'rightsize.api' not in sys.modules and 'torch' not in sys.modules; "
        "from rightsize.api import plan, PlanRecord; assert rightsize.memory and rightsize.PlanRecord is PlanRecord; "
        "import pickle; assert pickle.loads(pickle.dumps(rightsize.plan)) is plan and 'torch' not in sys.modules; "
        "print(rightsize.__version__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip()
    import rightsize

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        rightsize.nope  # noqa: B018


def test_rs_plan_and_measure_stay_callable_once_their_subpackages_are_imported() -> None:
    """The README's order (rs.plan, then rs.measure; or a notebook cell run twice) failed with "'module' object is
    not callable": importing rightsize.plan / rightsize.measure binds the packages over the API's names."""
    code = (
        "import rightsize as rs, rightsize.plan, rightsize.measure, rightsize.api as api, inspect\n"
        "assert 'store' in inspect.signature(rs.plan).parameters\n"  # the function's, not (*args, **kwargs)
        "api.plan = lambda *a, **k: ('plan', a, k)\n"
        "api.measure = lambda *a, **k: ('measure', a, k)\n"
        "assert rs.plan('x.yaml', seed=1) == ('plan', ('x.yaml',), {'seed': 1}), rs.plan\n"
        "assert rs.measure('q.yaml') == ('measure', ('q.yaml',), {})\n"
        "from rightsize.plan import plan_kind, PlanResult\n"  # the packages keep their contents
        "import rightsize.measure.sweep as sweep\n"
        "assert sweep.__name__ == 'rightsize.measure.sweep' and callable(plan_kind)\n"
        "import copy, pickle\n"  # a process pool maps rs.plan: it pickled until the first call
        "assert pickle.loads(pickle.dumps(rs.plan)) is api.plan and copy.deepcopy(rs.measure) is api.measure\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-800:]


def test_every_api_function_has_its_signature_and_type_hints() -> None:
    """typing.get_type_hints(rs.plan) raised NameError (the annotations' names were imported under TYPE_CHECKING
    only) or gave {} once rs.plan was the package; rs.diagnose showed (*args, **kwargs). Checked before and after
    the subpackages named like the functions are imported, and torch stays unloaded."""
    code = (
        "import inspect, json, sys, typing, rightsize as rs\n"
        "def hints():\n"
        "    out = {}\n"
        "    for name in rs.__all__:\n"
        "        obj = getattr(rs, name)\n"
        "        if callable(obj):\n"
        "            h = typing.get_type_hints(obj)\n"
        "            named = {k: getattr(v, '__name__', str(v)) for k, v in h.items()}\n"
        "            out[name] = [str(inspect.signature(obj)), named]\n"
        "    return out\n"
        "before = hints()\n"
        "import rightsize.plan, rightsize.measure, rightsize.diagnose\n"
        "after = hints()\n"
        "assert type(rs.plan).__name__ == '_ApiPackage' and before == after, (before, after)\n"
        "assert 'torch' not in sys.modules\n"
        "print(json.dumps(after))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-1500:]
    got = json.loads(out.stdout)
    assert set(got) == {"PlanRecord", "diagnose", "measure", "memory", "plan", "workload"}
    assert got["plan"][1]["return"] == "PlanRecord" and "Workload" in got["plan"][1]["spec"]
    assert "Store" in got["plan"][1]["store"] and "Catalog" in got["plan"][1]["catalog"]
    assert got["plan"][0].startswith("(spec: 'str | Path | dict[str, Any] | Workload', *, store:")
    assert got["measure"][1]["return"] == "Profile" and "Store" in got["measure"][1]["store"]
    assert got["memory"][1]["return"] == "MemoryEstimate" and "Catalog" in got["memory"][1]["catalog"]
    assert got["workload"][1]["return"] == "Workload"
    assert got["PlanRecord"][1]["result"] == "PlanResult"
    assert got["diagnose"] == ["() -> rightsize.diagnose.Watching", {"return": "Watching"}]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: rs.plan(None), r"^spec: must be a YAML path, a dict in the spec's schema or a Workload, got NoneType"),
        (lambda: rs.workload(1.5), r"^spec: must be .* got float 1\.5"),
        (lambda: rs.workload(""), r"^spec: is empty; pass the path to a YAML spec"),  # had been "spec file '.'"
        (lambda: rs.measure([]), r"^spec: must be .* got list"),
        (lambda: rs.plan("name: x\nmodel: distilbert\n"), r"^spec: is YAML text, not a path"),
        (lambda: rs.plan({"model": "distilbert"}, store=123), r"^store: must be a path to a SQLite store"),
        (lambda: rs.plan({"model": "distilbert"}, seed="a"), r"^seed: must be an integer 0\.\.4294967295, got str"),
        (lambda: rs.plan({"model": "distilbert"}, seed=-1), r"^seed: must be 0\.\.4294967295, got -1"),
        (lambda: rs.memory(None), r"^model: must be a zoo name"),
        (lambda: rs.memory("distilbert", batch_size="8"), r"^batch_size: must be an integer, got str '8'"),
        (lambda: rs.memory("distilbert", precision=5), r"^precision: must be a string"),
        (lambda: rs.memory("distilbert", catalog=123), r"^catalog: must be a CSV path, a Catalog or None"),
        # below: an AttributeError in memory_tiers, estimate_memory()'s own TypeError, slice()'s, pathlib's
        (lambda: rs.memory("distilbert", tiers=[1]), r"^tiers: must be 'builtin', GiB sizes such as '8,16,24', or"),
        (lambda: rs.memory("distilbert", tiers="x"), r"^tiers: expected 'builtin' or GiB sizes"),  # not --tiers
        # the argument's name, not the CLI's (batch:, seq:); and the CLI's limits (1e12 had been blamed on seq)
        (lambda: rs.memory("distilbert", batch_size=-4), r"^batch_size: must be >= 1, got -4"),
        (lambda: rs.memory("gpt2", batch_size=10**12), r"^batch_size: must be at most 100,000,000, got 1,000,000,"),
        (lambda: rs.memory("distilbert", seq_len=-1), r"^seq_len: must be >= 1"),
        (lambda: rs.memory("resnet50", image_size=10**6), r"^image_size: must be at most 8,192, got 1,000,000"),
        (lambda: rs.memory("gpt2", mode="train", fused="no"), r"^fused: must be True or False, got str 'no'"),
        (lambda: rs.plan({"model": "distilbert"}, progress="yes"), r"^progress: must be True or False, got str"),
        (lambda: rs.memory("distilbert", foo=1), r"^foo: is not an argument of rightsize\.memory\. Known: mode, "),
        (lambda: rs.memory("distilbert", tier="8"), r"^tier: is not an argument of rightsize\.memory\. Did you mean"),
        (lambda: _record().to_dict(top=1.5), r"^top: must be a count of candidates >= 0, or None for all, got float"),
        (lambda: _record().to_json(top=-1), r"^top: must be a count of candidates >= 0, or None for all; got -1"),
        (lambda: _record().report(None), r"^path: must be a file path ending in \.html or \.md, got NoneType"),
    ],
)
def test_a_wrong_argument_is_named(call: object, message: str) -> None:
    """A wrong type had surfaced as pathlib's or numpy's TypeError, or an AttributeError inside did_you_mean."""
    with pytest.raises(SpecError, match=message):
        call()  # type: ignore[operator]


def test_a_read_only_or_closed_store_is_named(tmp_path: Path) -> None:
    """A read-only Store raised sqlite3's "attempt to write a readonly database" from inside the sweep; a closed one
    "Cannot operate on a closed database"."""
    from rightsize.store import Store

    with Store(tmp_path / "s.db") as st:
        pass
    with pytest.raises(SpecError, match=r"^store: the Store on .*s\.db' is closed"):
        rs.measure(SPEC, store=st)
    with Store(tmp_path / "s.db", read_only=True) as ro, pytest.raises(SpecError, match=r"^store: .* read_only=True"):
        rs.plan(SPEC, store=ro)


def test_a_new_store_is_announced(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`rs.plan(spec, store="/tmp/typo/x.sqlite")` created an empty store and began minutes of measuring, unsaid."""
    path = tmp_path / "typo" / "x.sqlite"
    with pytest.raises(UnsupportedError):  # cpu fp16 is skipped: it stops before measuring, the store open
        rs.measure(SPEC | {"devices": ["cpu"], "precisions": ["fp16"]}, store=path)
    assert f"rightsize: new store at {path}: nothing measured yet, measuring now\n" in capsys.readouterr().err
    with pytest.raises(UnsupportedError):
        rs.measure(SPEC | {"devices": ["cpu"], "precisions": ["fp16"]}, store=path)
    assert "new store" not in capsys.readouterr().err  # the second time it is there


def test_measure_says_when_nothing_ran(tmp_path: Path) -> None:
    """`rs.measure` of a cuda-only spec on a CPU machine returned an empty Profile, silently; bench exits 2."""
    import torch

    from rightsize.errors import UnsupportedError

    if torch.cuda.is_available():
        pytest.skip("this machine runs cuda")
    spec = SPEC | {"devices": ["cuda"]}
    with pytest.raises(UnsupportedError, match=r"^nothing measured: the spec's devices \(cuda\)"):
        rs.measure(spec, store=tmp_path / "s.db")


def _stored(precision: str, batch: int, env_id: str) -> Measurement:
    return Measurement(
        "distilbert", "inference", "cpu", precision, batch, None, {"seq_len": 16}, "ok",  # type: ignore[arg-type]
        latency_ms=Latency(5.0, 6.0, 7.0, 5.0, 0.1, 20), env_id=env_id, tiny=True,
    )  # fmt: skip


def test_measure_returns_the_specs_configs_not_the_stores_whole_profile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`rs.measure(quick.yaml)` (fp32, bf16) returned 9 rows, int8 among them, stored for another spec on the same
    model and input (`bench` shows the spec's 6); a cuda-only spec on a CPU machine returned those CPU rows."""
    import rightsize.measure.profile_source as source
    from rightsize.errors import UnsupportedError
    from rightsize.measure.env import fingerprint
    from rightsize.measure.sweep import SweepResult
    from rightsize.store import Store

    env = fingerprint()
    ours = [_stored("fp32", b, env.id) for b in (1, 4)]
    with Store(tmp_path / "s.db") as st:
        st.save_env(env)
        run = st.start_run("bench", name="other", model="distilbert", env_id=env.id)
        st.add_measurements(run, [*ours, *(_stored("int8", b, env.id) for b in (1, 4))])
        st.finish_run(run)
    swept = SweepResult("r1", env, measurements=ours)
    monkeypatch.setattr(source, "run_sweep", lambda *_, **__: swept)
    spec = SPEC | {"input": {"seq_len": 16}, "precisions": ["fp32"], "batch_sizes": [1, 4], "devices": ["cpu"]}
    profile = rs.measure(spec, store=tmp_path / "s.db")
    assert [(r["precision"], r["batch_size"]) for r in profile.rows()] == [("fp32", 1), ("fp32", 4)]
    swept = SweepResult("r2", env, notes=["device cuda skipped: no CUDA device on this machine"])
    with pytest.raises(UnsupportedError, match=r"^nothing measured: the spec's devices \(cuda\)"):
        rs.measure(spec | {"devices": ["cuda"]}, store=tmp_path / "s.db")


@pytest.mark.slow
def test_measure_says_when_every_config_failed(tmp_path: Path) -> None:
    """A sequence past BERT's 512 positions failed its one config, and `rs.measure` returned that Profile silently."""
    from rightsize.errors import RunFailedError

    spec = {"name": "long", "model": "hf:bert", "tiny": True, "input": {"seq_len": 100_000}, "batch_sizes": [1],
            "precisions": ["fp32"], "devices": ["cpu"]}  # fmt: skip
    with pytest.raises(
        RunFailedError, match=r"^every config of hf:bert failed here \(1\), e\.g\. batch 1 fp32 on cpu: "
    ):
        rs.measure(spec, store=tmp_path / "s.db")


def test_diagnose_used_without_a_with_block_says_how() -> None:
    """`w = rs.diagnose(); w.report()` raised AttributeError on contextlib's _GeneratorContextManager, and
    `rightsize.diagnose(5)` a TypeError naming _CallableModule.__call__."""
    import rightsize

    with pytest.raises(SpecError, match=r"^diagnose: watches the code inside a with block; write `with rs\.diagnose"):
        rs.diagnose().report()
    with pytest.raises(SpecError, match=r"^diagnose: takes no arguments"):
        rightsize.diagnose(5)  # type: ignore[call-arg]
    with rs.diagnose() as w:
        sum(range(1000))
    assert w.report().startswith("watched ")
