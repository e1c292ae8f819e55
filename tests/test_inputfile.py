"""The input boundary: user files are size-capped UTF-8, YAML is refused when it could run away, and
errors never expand the value; a fuzz over bytes and structures finds nothing but SpecError."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rightsize.errors import RightsizeError, SpecError
from rightsize.inputfile import (
    MAX_ALIASES,
    MAX_DEPTH,
    MAX_EXPANDED,
    _check_shape,
    load_yaml,
    read_user_text,
    short,
    write_whole,
)
from rightsize.spec import load_spec, parse_spec
from rightsize.spec.schema import Workload

BASE = "name: h\nmodel: simplenet\n"


def _write(tmp_path: Path, data: bytes, name: str = "spec.yaml") -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


@pytest.mark.parametrize(
    ("data", "expect"),
    [
        (BASE.encode("utf-16"), "is not UTF-8 text"),
        ((BASE + "name2: caf\xe9\n").encode("latin-1"), "is not UTF-8 text"),
        ((BASE + "x: " + "[" * 5000 + "]" * 5000 + "\n").encode(), f"nests deeper than {MAX_DEPTH} levels"),
        ((BASE + "model: resnet50\n").encode(), "duplicate key 'model'"),
        (b"a: [1\n", "is not valid YAML at line"),
    ],
)
def test_hostile_files_give_one_line_spec_errors(tmp_path: Path, data: bytes, expect: str) -> None:
    with pytest.raises(SpecError) as err:
        load_spec(_write(tmp_path, data))
    assert expect in str(err.value) and "\n" not in str(err.value)


def test_a_utf8_bom_is_fine(tmp_path: Path) -> None:
    assert load_spec(_write(tmp_path, b"\xef\xbb\xbf" + BASE.encode())).model == "simplenet"


def test_size_cap_refuses_before_reading(tmp_path: Path) -> None:
    p = _write(tmp_path, (BASE + "# " + "x" * 200 + "\n").encode())
    with pytest.raises(SpecError, match="may be at most"):
        read_user_text(p, "spec", max_bytes=100)


def _bomb(levels: int, width: int, as_key: bool) -> str:
    lines = ["l0: &l0 [" + ",".join(["x"] * width) + "]"]
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * width) + "]")
    top = f"*l{levels - 1}"
    lines.append(f"{top} : 1" if as_key else f"name: {top}")
    return "\n".join(lines) + "\nmodel: simplenet\n"


@pytest.mark.parametrize("as_key", [True, False])
def test_alias_bombs_end_fast_with_a_short_message(tmp_path: Path, as_key: bool) -> None:
    for levels, width in ((9, 9), (4, 9)):  # 72 aliases: refused; 27: read, then refused by the schema
        t0 = time.perf_counter()
        with pytest.raises(SpecError) as err:
            load_spec(_write(tmp_path, _bomb(levels, width, as_key).encode()))
        assert time.perf_counter() - t0 < 2.0
        assert len(str(err.value)) < 300
        if levels * width > MAX_ALIASES:
            assert "aliases" in str(err.value)


def _laughs(levels: int, width: int) -> str:
    """The probe's bomb: ten scalars, then ``levels`` lists of ``width`` aliases to the one before."""
    text = "a0: &a0 [" + ",".join(["lol"] * 10) + "]\n"
    for i in range(1, levels + 1):
        text += f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * width) + "]\n"
    return text


def test_the_expansion_count_is_the_values_once_every_alias_is_written_out() -> None:
    """Keys count, a collection counts one, an alias counts what its anchor holds, a re-anchored name the newest."""
    assert _check_shape("a: 1\nb: [x, y]\n", "s") == 1 + 2 + 1 + 1 + 2  # the mapping, a, 1, b, the list, x, y
    assert _check_shape("a: &x [1, 2]\nb: [*x, *x]\n", "s") == 1 + 2 + 3 + (1 + 2 * 3)
    assert _check_shape("a: &x 1\nb: &x [1, 2, 3]\nc: *x\n", "s") == 1 + 3 + 1 + 4 + 4
    # the mapping, 4 keys, then a0's 11 values, a1's 1 + 8 * 11 = 89, a2's 1 + 8 * 89 = 713, a3's 1 + 8 * 713
    assert _check_shape(_laughs(3, 8), "s") == 1 + 4 + 11 + 89 + 713 + 5705


@pytest.mark.slow  # ~1 s on 2 cores: kept out of make test-fast
def test_an_alias_bomb_under_the_alias_count_is_refused_by_its_expansion() -> None:
    """8 levels of 8 aliases are 64, inside MAX_ALIASES: `plan` walked the 200 million values for minutes, at 55 MB."""
    assert MAX_ALIASES >= 8 * 8
    t0 = time.perf_counter()
    with pytest.raises(SpecError) as err:
        load_yaml(_laughs(8, 8), "bomb.yaml")
    assert time.perf_counter() - t0 < 2.0
    assert str(err.value) == (
        f"bomb.yaml: has YAML aliases (*name) that expand to 213,652,688 values (limit {MAX_EXPANDED:,}); "
        "write the values out"
    )
    assert load_yaml(_laughs(3, 8), "ok.yaml")["a3"][7][7][7] == ["lol"] * 10  # a block shared a few times is fine
    many = "x: [" + ",".join(["1"] * (MAX_EXPANDED + 10)) + "]\n"  # written out, not aliased: bounded by the file
    assert len(load_yaml(many, "long.yaml")["x"]) == MAX_EXPANDED + 10


def test_short_never_expands() -> None:
    deep: list[object] = ["x"] * 10
    for _ in range(8):
        deep = [deep] * 10
    assert len(short(deep)) <= 80
    assert "..." in short("y" * 10_000) and len(short("y" * 10_000)) <= 80


def test_numbers_must_be_finite_and_bounded() -> None:
    for targets, field in (
        ({"online": {"rate_per_s": float("inf"), "latency": {"bound_ms": 100}}}, "rate_per_s"),
        ({"online": {"rate_per_s": 1e12, "latency": {"bound_ms": 100}}}, "rate_per_s"),
        ({"batch": {"items": 10, "deadline_hours": float("nan")}}, "deadline_hours"),
        ({"interruptions_per_hour": float("inf"), "batch": {"items": 10, "deadline_hours": 1}}, "interruptions"),
    ):
        with pytest.raises(SpecError, match=field):
            parse_spec({"model": "simplenet", "targets": targets})
    with pytest.raises(SpecError, match=r"threads\[0\]"):
        parse_spec({"model": "simplenet", "threads": [1_000_000_000]})
    with pytest.raises(SpecError, match=r"input\.shape"):
        parse_spec({"model": "m.x:f", "input": {"shape": [100_000, 100_000, 100_000]}})


# -- fuzz ------------------------------------------------------------------------------------------

FIELDS = ["name", "model", "mode", "input", "batch_sizes", "precisions", "devices", "threads", "timing",
          "targets", "online", "batch", "training", "rate_per_s", "latency", "bound_ms", "items", "steps",
          "deadline_hours", "seq_len", "shape", "tiny", "x"]  # fmt: skip
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["simplenet", "distilbert", "fp32", "cpu", "inference", "training", "os:getcwd"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5), st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=8), inner, max_size=6)
    ),
    max_leaves=30,
)


@settings(
    max_examples=300, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(doc=st.dictionaries(st.sampled_from(FIELDS), values, max_size=8))
@pytest.mark.slow  # seconds: make test runs it, make test-fast skips it
def test_fuzzed_structures_validate_or_name_a_field(doc: dict[str, object]) -> None:
    text = yaml.safe_dump(doc)
    try:
        w = parse_spec(load_yaml(text, "fuzz.yaml"), "fuzz.yaml")
    except SpecError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 400
    else:
        assert isinstance(w, Workload)


@pytest.mark.slow  # ~1 s on 2 cores: kept out of make test-fast
@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(raw=st.binary(max_size=400) | st.text(max_size=400).map(str.encode))
def test_fuzzed_bytes_never_escape_as_other_errors(tmp_path_factory: pytest.TempPathFactory, raw: bytes) -> None:
    p = tmp_path_factory.mktemp("fuzz") / "spec.yaml"
    p.write_bytes(raw)
    try:
        load_spec(p)
    except RightsizeError as exc:
        assert "\n" not in str(exc)


def _umask() -> int:
    import os

    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_write_whole_keeps_the_old_file_when_the_write_fails(tmp_path: Path) -> None:
    """`results --export keep.json` on a full disk truncated the previous export to a broken half and printed an
    OSError traceback (a file-size limit stands in for the full disk)."""
    import subprocess
    import sys

    out = tmp_path / "keep.json"
    out.write_text('{"old": true}')
    code = (
        "import resource, signal, sys\n"
        "from pathlib import Path\n"
        "from rightsize.errors import SpecError\n"
        "from rightsize.inputfile import write_whole\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\n"
        "try:\n"
        "    write_whole(Path(sys.argv[1]), 'x' * 100_000, '--export')\n"
        "except SpecError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True, timeout=60)
    assert done.stdout.startswith(f"--export: cannot write {str(out)!r} (File too large); it was left as it was")
    assert out.read_text() == '{"old": true}' and sorted(p.name for p in tmp_path.iterdir()) == ["keep.json"]
    out.chmod(0o640)
    write_whole(out, "new", "--export")
    assert out.read_text() == "new" and out.stat().st_mode & 0o777 == 0o640  # the file's mode kept
    fresh = tmp_path / "fresh.json"
    write_whole(fresh, "x", "--export")
    assert fresh.stat().st_mode & 0o777 == 0o666 & ~_umask()  # as open() would make it, not mkstemp's 0600


def test_an_alias_inside_its_own_anchor_is_refused_not_recursed_into() -> None:
    """`a: &a [*a]` is one alias at depth 1, under both limits: PyYAML built a list holding itself, and the spec's key
    check recursed until RecursionError, a 53-line traceback, exit 1."""
    from rightsize.inputfile import load_yaml

    inside = r"^s\.yaml: an alias \(\*[ab]\) refers to the value it is inside \(line 1\)"
    for text in ("a: &a [*a]\n", "x: &b {y: {z: *b}}\n"):
        with pytest.raises(SpecError, match=inside):
            load_yaml(text, "s.yaml")
    assert load_yaml("base: &b [1, 2]\nother: *b\n", "s.yaml") == {"base": [1, 2], "other": [1, 2]}


def test_write_whole_to_a_directory_says_so(tmp_path: Path) -> None:
    """`record.report("adir.html")` on a directory said "(Is a directory) ... free some space": the wrong fix."""
    (tmp_path / "adir.html").mkdir()
    with pytest.raises(SpecError, match=r"^--report: '.*adir\.html' is a directory; pass the path of a file"):
        write_whole(tmp_path / "adir.html", "x", "--report")
    assert (tmp_path / "adir.html").is_dir()


BATCH = BASE + "targets:\n  batch:\n    items: 1000\n    deadline_hours: {}\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            BATCH.format("1:30"),
            "targets.batch.deadline_hours: '1:30' is read by YAML 1.1 as 90 (base 60); write 1.5 for 1 + 30/60, or 90",
        ),
        (
            BATCH.format("1:30:15"),
            "targets.batch.deadline_hours: '1:30:15' is read by YAML 1.1 as 5415 (base 60); "
            "write 1.50417 for 1 + 30/60 + 15/3600, or 5415",
        ),
        (
            BATCH.format("0x10"),
            "targets.batch.deadline_hours: '0x10' is read by YAML 1.1 as 16 (hexadecimal); write 16",
        ),
        (
            BATCH.format("017"),
            "targets.batch.deadline_hours: '017' is read by YAML 1.1 as 15 (octal); "
            "write 15, or 17 without the leading zero",
        ),
        (BATCH.format("0o17"), "targets.batch.deadline_hours: '0o17' is read by YAML 1.2 as 15 (octal); write 15"),
        (BATCH.format("0b11"), "targets.batch.deadline_hours: '0b11' is read by YAML 1.1 as 3 (binary); write 3"),
        (
            BATCH.format("1_000"),
            "targets.batch.deadline_hours: '1_000' is read by YAML 1.1 as 1000 (digits grouped by _); write 1000",
        ),
        (
            BASE + "targets: {kind: classic_ml, rows: 1:30}\n",
            "targets.rows: '1:30' is read by YAML 1.1 as 90 (base 60); write 1.5 for 1 + 30/60, or 90",
        ),
        (
            BASE + "targets: {kind: classic_ml, rows: 0x10}\n",
            "targets.rows: '0x10' is read by YAML 1.1 as 16 (hexadecimal); write 16",
        ),
        (BASE + "batch_sizes: [1, 0x10]\n", "batch_sizes[1]: '0x10' is read by YAML 1.1 as 16 (hexadecimal); write 16"),
        (
            BASE.replace("simplenet", "llama-7b") + "targets:\n  generative: {rate_per_s: 5, prompt_tokens: 1_000, "
            "ttft: {bound_ms: 2000}, tpot: {bound_ms: 60}}\n",
            "targets.generative.prompt_tokens: '1_000' is read by YAML 1.1 as 1000 (digits grouped by _); write 1000",
        ),
    ],
    ids=[
        "base-60",
        "base-60-hms",
        "hex",
        "octal",
        "octal-0o",
        "binary",
        "underscore",
        "rows-base-60",
        "rows-hex",
        "list-item",
        "tokens",
    ],
)
def test_numbers_yaml_1_1_reads_otherwise_are_refused_naming_the_decimal(
    tmp_path: Path, text: str, message: str
) -> None:
    """`deadline_hours: 1:30` (meant: an hour and a half) was read by YAML 1.1's base 60 as 90, and `plan` planned a
    90-hour deadline, exit 0; `0x10`, `017` and `1_000` were numbers too. The loader reads them as text (YAML 1.2),
    and a number field says what YAML 1.1 would have made of them and what to write."""
    with pytest.raises(SpecError) as err:
        load_spec(_write(tmp_path, text.encode()))
    assert str(err.value) == message


def test_decimal_numbers_load_as_before_and_the_rest_is_text() -> None:
    doc = load_yaml("a: [90, -3, +5, 0, 1.5, 1., .5, 1.5e+3, 1e6, .inf, -.inf, yes, ~, 1:30, 0x10, 017, 1_000]\n", "s")
    a = doc["a"]
    assert a[:8] == [90, -3, 5, 0, 1.5, 1.0, 0.5, 1500.0] and all(type(x) is not str for x in a[:8])
    assert a[8:11] == ["1e6", float("inf"), float("-inf")]  # 1e6: text, as before; number fields read it
    assert a[11:] == [True, None, "1:30", "0x10", "017", "1_000"]
    w = parse_spec(load_yaml(BATCH.format("1.5"), "s"))
    assert w.targets is not None and w.targets.batch is not None and w.targets.batch.deadline_hours == 1.5
    assert parse_spec(load_yaml("name: 1:30\nmodel: simplenet\n", "s")).name == "1:30"  # text where text is taken
    assert yaml.safe_load("a: 1:30") == {"a": 90}  # PyYAML's own loaders are left as they are


def test_plan_refuses_a_base_60_deadline_with_exit_code_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rightsize.cli.app import main

    spec = _write(tmp_path, BATCH.format("1:30").encode())
    with pytest.raises(SystemExit) as exc:
        main(["plan", str(spec), "--store", str(tmp_path / "s.db")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "error: targets.batch.deadline_hours: '1:30' is read by YAML 1.1 as 90 (base 60); write 1.5" in err


def test_merge_keys_merge_and_a_key_written_twice_is_still_refused() -> None:
    """`tpot: {<<: *slo, bound_ms: 60}` said "is not valid YAML at line 5; fix the syntax": the `<<` key was built
    before the merge was done."""
    text = (BASE.replace("simplenet", "llama-7b") + "targets:\n  generative:\n    rate_per_s: 5\n"
            "    ttft: &slo {percentile: 95, bound_ms: 2000}\n    tpot: {<<: *slo, bound_ms: 60}\n")  # fmt: skip
    w = parse_spec(load_yaml(text, "s.yaml"))
    assert w.targets is not None and w.targets.generative is not None
    assert (w.targets.generative.tpot.percentile, w.targets.generative.tpot.bound_ms) == (95, 60)
    merged = load_yaml("a: &a {x: 1}\nb: &b {x: 2, y: 2}\nc: {<<: [*a, *b], z: 3}\n", "s")
    assert merged["c"] == {"x": 1, "y": 2, "z": 3}  # of several merged, the first listed wins
    with pytest.raises(SpecError) as err:
        load_yaml("a: &a {x: 1}\nb: {<<: *a, y: 1, y: 2}\n", "s.yaml")
    assert str(err.value) == "s.yaml line 2: duplicate key 'y'; keep one of them"
    with pytest.raises(SpecError) as err:
        load_yaml("a: {<<: 5}\n", "s.yaml")
    assert str(err.value) == (
        "s.yaml: has a merge key (<<) at line 1 that names no mapping; merge a mapping (`<<: *base`) or write the "
        "keys out"
    )
    assert load_yaml("name: <<\n", "s") == {"name": "<<"}


def test_several_documents_are_named_as_such(tmp_path: Path) -> None:
    """A file with a second `---` said "is not valid YAML at line 3; fix the syntax": it is valid YAML."""
    with pytest.raises(SpecError) as err:
        load_spec(_write(tmp_path, (BASE + "---\n" + BASE).encode()))
    assert str(err.value) == (
        "spec.yaml: holds several YAML documents (another starts at line 3); a spec is one document: remove the "
        "extra '---' and what follows, or split the file"
    )
    assert load_spec(_write(tmp_path, ("---\n" + BASE + "...\n").encode())).model == "simplenet"


def test_a_whole_number_past_pythons_digit_limit_is_one_line() -> None:
    """`a: 1` and 5,000 zeros raised int()'s ValueError (4,300 digits) out of the loader as a traceback."""
    from rightsize.errors import SpecError
    from rightsize.inputfile import load_yaml

    with pytest.raises(SpecError, match=r"^s\.yaml: holds a whole number of more than 4,300 digits"):
        load_yaml("a: 1" + "0" * 5000, "s.yaml")


def test_a_tab_and_an_undefined_alias_are_named(tmp_path: Path) -> None:
    """Both said only "is not valid YAML at line N; fix the syntax" (libyaml names neither the tab nor the alias)."""
    with pytest.raises(SpecError) as err:
        load_spec(_write(tmp_path, (BASE + "batch_sizes:\n\t- 1\n").encode()))
    assert str(err.value) == (
        "spec.yaml: is not valid YAML at line 4, column 1: a tab character, which YAML does not allow there (it "
        "indents with spaces only); replace it with spaces"
    )
    with pytest.raises(SpecError) as err:
        load_spec(_write(tmp_path, (BASE + "batch_sizes: [1, *sizes]\n").encode()))
    assert str(err.value) == (
        "spec.yaml: is not valid YAML at line 3: the alias *sizes names no anchor; define `&sizes` on a value "
        "before it, or write the value out"
    )


def test_a_symbolic_link_loop_or_a_link_to_nothing_is_named(tmp_path: Path) -> None:
    """A spec path that is a symbolic link loop said "spec file 'loop1.yaml' not found"."""
    (tmp_path / "loop1.yaml").symlink_to("loop2.yaml")
    (tmp_path / "loop2.yaml").symlink_to("loop1.yaml")
    (tmp_path / "dangling.yaml").symlink_to("gone.yaml")
    for read in (load_spec, lambda p: read_user_text(p, "spec")):
        with pytest.raises(RightsizeError, match=r"loop1\.yaml' is a symbolic link loop \(its links lead back"):
            read(tmp_path / "loop1.yaml")
        with pytest.raises(RightsizeError, match=r"dangling\.yaml' is a symbolic link to 'gone\.yaml', which does "):
            read(tmp_path / "dangling.yaml")
        with pytest.raises(RightsizeError, match=r"nothing\.yaml' not found"):
            read(tmp_path / "nothing.yaml")
