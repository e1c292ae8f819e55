from pathlib import Path

import pytest

from rightsize.errors import NotFoundError, SpecError
from rightsize.spec import load_spec, parse_spec


def _spec(**over: object) -> dict[str, object]:
    return {"model": "distilbert", "batch_sizes": [1, 8], "precisions": ["fp32", "bf16"]} | over


def test_valid_spec_defaults_and_dedupe() -> None:
    w = parse_spec(_spec(batch_sizes=[8, 1, 8], precisions=["fp32", "fp32", "bf16"]))
    assert w.batch_sizes == [1, 8]
    assert w.precisions == ["fp32", "bf16"]
    assert w.mode == "inference" and w.devices == ["cpu"] and w.threads == [None]


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"batch_sizes": [-1]}, "batch_sizes[0]: must be >= 1, got -1"),
        ({"batch_sizes": [4, 0]}, "batch_sizes[1]: must be >= 1, got 0"),
        ({"precisions": ["fp8"]}, "precisions[0]: Input should be 'fp32', 'bf16', 'fp16' or 'int8'"),
        ({"mode": "train"}, "mode: Input should be 'inference' or 'training'"),
        ({"batch": [1]}, "batch: unknown field; Did you mean 'batch_sizes'?"),
        ({"zzz": 1}, "zzz: unknown field; remove it or check its spelling"),
        ({"timing": {"\n": 1}}, "timing.'\\n': unknown field"),  # a key YAML reads as a newline: still one line
        # a misspelt key is the cause, not the "missing" field it leaves behind
        (
            {"targets": {"online": {"rate_per_sec": 60, "latency": {"percentile": 95, "bound_ms": 80}}}},
            "targets.online.rate_per_sec: unknown field; Did you mean 'rate_per_s'?",
        ),
        ({"input": {"seq_len": 0}}, "input.seq_len: Input should be greater than or equal to 1"),
        ({"threads": [0]}, "threads[0]: must be between 1 and 4096, or null (all cores), got 0"),
        ({"model": "pkg.mod:"}, "model: must be a zoo name, 'package.module:factory'"),
        ({"timing": {"min_repeats": 10, "max_repeats": 5}}, "timing: max_repeats (5) must be >= min_repeats (10)"),
    ],
)
def test_bad_field_names_path_and_fix(over: dict[str, object], message: str) -> None:
    with pytest.raises(SpecError) as exc:
        parse_spec(_spec(**over))
    text = str(exc.value)
    assert text.startswith(message), text
    assert "\n" not in text


def test_the_other_bad_fields_are_named_too() -> None:
    """A spec with several bad fields said "(and 1 more)": the user fixed one, re-ran, and met the next."""
    with pytest.raises(SpecError) as exc:
        parse_spec(_spec(batch_sizes=[0], precisions=["fp99"], mode="train"))
    text = str(exc.value)
    assert text.startswith("mode: ") and text.endswith("(and 2 more: batch_sizes, precisions[0])"), text


def test_a_misspelt_optional_key_gets_its_did_you_mean() -> None:
    """targets.batch.budget_usdd said "remove it or check its spelling": only a missing sibling or a top-level key
    had been matched against."""
    batch = {"items": 1000, "deadline_hours": 2, "budget_usdd": 3}
    with pytest.raises(SpecError, match=r"^targets\.batch\.budget_usdd: unknown field; Did you mean 'budget_usd'\?$"):
        parse_spec(_spec(targets={"batch": batch}))
    typo = {"items": 1000, "deadline_hour": 2}  # the field it leaves missing is not "1 more" to fix
    with pytest.raises(
        SpecError, match=r"^targets\.batch\.deadline_hour: unknown field; Did you mean 'deadline_hours'\?$"
    ):
        parse_spec(_spec(targets={"batch": typo}))


def test_a_field_of_another_section_says_where_it_belongs() -> None:
    """A top-level `kind: classic_ml` (a field of targets) said "Did you mean 'tiny'?"."""
    rules = {"rows": 20_000_000}
    with pytest.raises(SpecError, match=r"^kind: unknown field here; it belongs under targets \(write targets: "
                       r"\{kind: classic_ml\}\)"):  # fmt: skip
        parse_spec(_spec(kind="classic_ml", targets=rules))
    with pytest.raises(SpecError, match=r"^targets\.online\.bound_ms: unknown field here; it belongs under "
                       r"targets\.online\.latency \(write latency: \{bound_ms: 80\}\)$"):  # fmt: skip
        parse_spec(_spec(targets={"online": {"rate_per_s": 1, "latency": {"percentile": 95}, "bound_ms": 80}}))
    with pytest.raises(SpecError, match=r"^rate_per_s: unknown field here; it belongs under targets\.online or "
                       r"targets\.generative: move it there"):  # fmt: skip
        parse_spec(_spec(rate_per_s=10))
    with pytest.raises(SpecError, match=r"^seq_len: unknown field here; it belongs under input \(write input: "
                       r"\{seq_len: 64\}\)$"):  # fmt: skip
        parse_spec(_spec(seq_len=64))
    # a field of the top level or of another branch, written inside a section (an IndexError had escaped)
    with pytest.raises(SpecError, match=r"^input\.name: unknown field here; it belongs at the top level of the spec "
                       r"\(write name: demo there\)"):  # fmt: skip
        parse_spec(_spec(input={"name": "demo"}))
    with pytest.raises(SpecError, match=r"^input\.kind: unknown field here; it belongs under targets \(write "
                       r"targets: \{kind: online\} at the top level\)"):  # fmt: skip
        parse_spec(_spec(input={"kind": "online"}))


def test_a_missing_field_and_a_bare_value_for_a_list_name_the_fix() -> None:
    """The messages "targets.online.latency: required field is missing" and "targets.purchase: Input should be a
    valid list, got 'on_demand'" named no fix (README: one line naming the field and the fix)."""
    with pytest.raises(SpecError, match=r"^targets\.online\.latency: required field is missing; add latency: "
                       r"\{percentile: 95, bound_ms: 80\}$"):  # fmt: skip
        parse_spec(_spec(targets={"online": {"rate_per_s": 10}}))
    with pytest.raises(SpecError, match=r"^targets\.online\.latency\.bound_ms: required field is missing; add "
                       r"bound_ms: a number \(latency bound at that percentile, milliseconds\)$"):  # fmt: skip
        parse_spec(_spec(targets={"online": {"rate_per_s": 10, "latency": {"percentile": 99}}}))
    with pytest.raises(SpecError, match=r"^targets\.purchase: Input should be a valid list, got 'on_demand'; write "
                       r"it as a list: purchase: \[on_demand\]$"):  # fmt: skip
        parse_spec(_spec(targets={"kind": "classic_ml", "rows": 5, "purchase": "on_demand"}))
    with pytest.raises(SpecError, match=r"^batch_sizes: .*; write it as a list: batch_sizes: \[8\]$"):
        parse_spec(_spec(batch_sizes=8))


def test_missing_model_and_not_a_mapping() -> None:
    with pytest.raises(SpecError, match=r"^model: required field is missing"):
        parse_spec({"batch_sizes": [1]})
    with pytest.raises(SpecError, match="must be a YAML mapping"):
        parse_spec([1, 2])
    with pytest.raises(SpecError, match=r"^spec: the file is empty"):
        parse_spec(None)


def test_a_key_yaml_reads_as_null_or_a_number_is_named_where_it_is() -> None:
    with pytest.raises(SpecError, match=r"^spec: has the key None, which YAML reads as NoneType, not a field name"):
        parse_spec(_spec() | {None: 2})
    with pytest.raises(SpecError, match=r"^targets: has the key 1, which YAML reads as int"):
        parse_spec(_spec(targets={1: 2}))


def test_targets_validation() -> None:
    online = {"online": {"rate_per_s": 10, "latency": {"percentile": 95, "bound_ms": 80}}}
    w = parse_spec(_spec(targets=online))
    assert w.targets is not None and w.targets.online is not None
    assert w.targets.online.latency.bound_ms == 80
    with pytest.raises(SpecError, match=r"^targets.online.latency.bound_ms"):
        parse_spec(_spec(targets={"online": {"rate_per_s": 10, "latency": {"bound_ms": -5}}}))


def test_a_validator_that_names_the_value_is_not_followed_by_a_second_got() -> None:
    gen = {"rate_per_s": 3, "prompt_tokens": {"uniform": [500, 10]}}
    gen |= {"ttft": {"bound_ms": 500}, "tpot": {"bound_ms": 50}}
    with pytest.raises(SpecError) as e:
        parse_spec(_spec(model="llama-7b", targets={"generative": gen}))
    assert str(e.value).count("got") == 1 and "got [500, 10]" in str(e.value)


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"batch_sizes": [1, True]}, "batch_sizes[1]: must be a number (not a boolean), got true"),
        ({"timing": {"max_time_s": True}}, "timing.max_time_s: must be a number (not a boolean), got true"),
        (
            {"targets": {"online": {"rate_per_s": True, "latency": {"bound_ms": 80}}}},
            "targets.online.rate_per_s: must be a number (not a boolean), got true",
        ),
        (
            {"targets": {"online": {"rate_per_s": 5, "latency": {"percentile": False, "bound_ms": 80}}}},
            "targets.online.latency.percentile: must be a number (not a boolean), got false",
        ),
    ],
)
def test_a_boolean_is_never_read_as_a_number(over: dict[str, object], message: str) -> None:
    # pydantic alone reads `rate_per_s: true` as 1 req/s and `percentile: false` as p0: a plan from a typo
    with pytest.raises(SpecError) as exc:
        parse_spec(_spec(**over))
    assert str(exc.value) == message


def test_a_boolean_field_still_takes_a_boolean() -> None:
    assert parse_spec(_spec(tiny=True)).tiny is True


@pytest.mark.parametrize("value", [2.5, "abc", True, None, [1, 2]])
def test_a_token_length_that_is_not_a_count_names_the_forms_it_takes(value: object) -> None:
    gen = {"rate_per_s": 3, "prompt_tokens": value, "ttft": {"bound_ms": 500}, "tpot": {"bound_ms": 50}}
    with pytest.raises(SpecError, match=r"^targets.generative.prompt_tokens: give a whole number of tokens .*csv"):
        parse_spec(_spec(model="llama-7b", targets={"generative": gen}))


def test_a_token_count_written_as_a_float_or_in_e_notation_is_a_count() -> None:
    for value, n in ((512.0, 512), ("1e3", 1000), (64, 64)):  # YAML reads 1e3 (no dot) as a string
        gen = {"rate_per_s": 3, "output_tokens": value, "ttft": {"bound_ms": 500}, "tpot": {"bound_ms": 50}}
        w = parse_spec(_spec(model="llama-7b", targets={"generative": gen}))
        assert w.targets is not None and w.targets.generative is not None
        assert w.targets.generative.output_tokens.fixed == n
    gen = {"rate_per_s": 3, "output_tokens": "1e12", "ttft": {"bound_ms": 500}, "tpot": {"bound_ms": 50}}
    with pytest.raises(SpecError, match=r"^targets.generative.output_tokens: must be 1 to 1000000 tokens, got 10+$"):
        parse_spec(_spec(model="llama-7b", targets={"generative": gen}))


def test_load_spec_file_errors(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="not found"):
        load_spec(tmp_path / "nope.yaml")
    with pytest.raises(NotFoundError, match="is not a regular file"):  # a directory where the spec should be
        load_spec(tmp_path)
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: [unclosed\n")
    with pytest.raises(SpecError, match="not valid YAML at line"):
        load_spec(bad)


def test_shipped_examples_are_valid() -> None:
    root = Path(__file__).resolve().parents[2] / "examples"
    files = sorted(root.glob("*.yaml"))
    assert files, "examples/ must ship specs"
    for f in files:
        load_spec(f)


@pytest.mark.parametrize(
    ("generative", "says"),
    [
        ({"rate_per_s": 0}, "rate_per_s: Input should be .* 0.000001, got 0; set it to a number 1e-06 or more"),
        ({"budget_usd_per_hour": 0}, "got 0; set it to a number above 0"),
        ({"ttft": {"bound_ms": 500, "percentile": 100}}, "ttft.percentile: .* got 100; set it to a number below 100"),
        ({"engine": "EAGER"}, "engine: Input should be 'graphs' or 'eager', got 'EAGER'; Did you mean 'eager'\\?"),
        ({"engine": "jit"}, "got 'jit'; use one of graphs, eager"),
        ({"max_replicas": 2.5}, "max_replicas: .*; write a whole number \\(e.g. 8\\)"),
        ({"output_tokens": 1e300}, "output_tokens: must be 1 to 1000000 tokens, got 1e\\+300$"),  # 300 digits
    ],
)
def test_a_checked_bound_or_choice_says_what_to_write(generative: dict[str, object], says: str) -> None:
    """pydantic's own checks named the field and the value but no fix ('Input should be greater than 0, got 0')."""
    gen = {"rate_per_s": 3, "ttft": {"bound_ms": 500}, "tpot": {"bound_ms": 50}} | generative
    with pytest.raises(SpecError, match=says):
        parse_spec(_spec(model="llama-7b", targets={"generative": gen}))


def test_a_relative_model_path_is_found_next_to_the_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`hf:./dir` was read next to the spec in a generative spec and from the working directory in an online one:
    the same spec planned from another folder said "not found"."""
    spec_dir = tmp_path / "specs"
    (spec_dir / "tinybert").mkdir(parents=True)
    (spec_dir / "tinybert" / "config.json").write_text("{}")
    (spec_dir / "model.onnx").write_bytes(b"")
    elsewhere = tmp_path / "work"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    for ref, want in (("hf:./tinybert", f"hf:{spec_dir / 'tinybert'}"), ("model.onnx", str(spec_dir / "model.onnx")),
                      ("ort:./model.onnx", f"ort:{spec_dir / 'model.onnx'}")):  # fmt: skip
        (spec_dir / "s.yaml").write_text(f"model: '{ref}'\n")
        assert load_spec(spec_dir / "s.yaml").model == want
    (elsewhere / "model.onnx").write_bytes(b"")  # in the working directory: read from there, as before
    for ref in ("model.onnx", "distilbert", "mypkg.mod:build", "hf:gpt2", "hf:./missing"):
        (spec_dir / "s.yaml").write_text(f"model: '{ref}'\n")
        assert load_spec(spec_dir / "s.yaml").model == ref


def test_a_nan_or_inf_says_what_to_write() -> None:
    """`deadline_hours: .nan` read "Input should be a finite number, got nan": the field and the value, no fix."""
    for value in (float("nan"), float("inf")):
        with pytest.raises(SpecError, match=r"^targets\.batch\.deadline_hours: Input should be a finite number, got "
                           r"(nan|inf); write a number \(YAML's \.nan and \.inf are not\), e.g\. 0\.5$"):  # fmt: skip
            parse_spec({"model": "distilbert", "targets": {"batch": {"items": 10, "deadline_hours": value}}})


def test_a_factory_module_next_to_the_spec_names_its_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`model: mymod:build` with mymod.py beside the spec, planned from another folder, said only "check
    PYTHONPATH"."""
    spec_dir, elsewhere = tmp_path / "specs", tmp_path / "work"
    spec_dir.mkdir()
    elsewhere.mkdir()
    (spec_dir / "besidemod_rs.py").write_text("def build(): ...\n")
    (spec_dir / "s.yaml").write_text("model: 'besidemod_rs:build'\n")
    monkeypatch.chdir(elsewhere)
    with pytest.raises(NotFoundError, match=rf"^model: module 'besidemod_rs' is next to the spec in {spec_dir}, "
                       rf"which is not on the import path; run with PYTHONPATH={spec_dir}$"):  # fmt: skip
        load_spec(spec_dir / "s.yaml")
    monkeypatch.syspath_prepend(str(spec_dir))  # importable: loaded as written
    assert load_spec(spec_dir / "s.yaml").model == "besidemod_rs:build"
    monkeypatch.chdir(spec_dir)  # from the spec's own folder the model's import error says it (test_byo)
    assert load_spec(spec_dir / "s.yaml").model == "besidemod_rs:build"


def test_an_empty_list_and_a_count_too_large_to_read_say_what_to_write() -> None:
    """`batch_sizes: []` read "List should have at least 1 item after validation, not 0" and `request_samples: 1e308`
    "exceeded maximum size": neither said what to write instead."""
    with pytest.raises(SpecError, match=r"^batch_sizes: .*; list at least one value, or drop the field for its"):
        parse_spec({"model": "distilbert", "batch_sizes": []})
    # six precisions read "List should have at most 5 items after validation, not 6", with no fix
    many = {"precisions": ["fp32", "tf32", "fp16", "bf16", "int8", "fp32"]}
    with pytest.raises(SpecError, match=r"^targets\.precisions: has 6 values; list at most 5$"):
        parse_spec({"model": "distilbert", "targets": many})
    online = {"rate_per_s": 5, "latency": {"percentile": 95, "bound_ms": 80}, "request_samples": 1e308}
    with pytest.raises(SpecError, match=r"^targets\.online\.request_samples: .*; write a whole number within the"):
        parse_spec({"model": "distilbert", "targets": {"online": online}})


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"model": "llama-7b", "targets": {"generative": {"rate_per_s": 1, "ttft": "2s"}}},
         "targets.generative.ttft: must be a mapping of its fields, e.g. {percentile: 95, bound_ms: 1000}, got '2s'"),
        ({"targets": {"online": {"rate_per_s": 5, "latency": 80}}},
         "targets.online.latency: must be a mapping of its fields, e.g. {percentile: 95, bound_ms: 80}, got 80"),
        ({"targets": {"online": 5}}, "targets.online: must be a mapping of its fields (rate_per_s, latency, "),
        ({"timing": 5}, "timing: must be a mapping of its fields (warmup, min_repeats, max_repeats, target_ci, "),
    ],
)  # fmt: skip
def test_a_section_given_as_one_value_names_its_fields_not_a_class(over: dict[str, object], message: str) -> None:
    """`ttft: 2s` read "Input should be a valid dictionary or instance of LatencyBound": a class name, no fix."""
    with pytest.raises(SpecError) as err:
        parse_spec(_spec(**over))
    text = str(err.value)
    assert text.startswith(message) and "LatencyBound" not in text and "instance" not in text


@pytest.mark.parametrize("name", ["a\x1b[31mb", "bell\x07", "two\nlines", "evil\u202egnp.exe"])
def test_a_name_a_terminal_would_obey_is_refused(name: str) -> None:
    """An ESC sequence in `name` was stored and printed raw by `plan` and `results` (recolouring the terminal); a
    right-to-left override reordered it."""
    with pytest.raises(SpecError, match=r"^name: holds the control character .* at position \d+ \(printed, a "
                       r"terminal would obey it\); write plain text"):  # fmt: skip
        parse_spec(_spec(name=name))
    assert parse_spec(_spec(name="Ünïcode — ok 模型")).name == "Ünïcode — ok 模型"
