"""models.user_input: the --shape/--vocab/--seq/--image options, each refused where the model would ignore it."""

from pathlib import Path

import pytest

from rightsize.errors import NotFoundError, SpecError
from rightsize.models.user_input import parse_shape, user_input_options


@pytest.fixture(autouse=True)
def _user_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The user models these tests name exist (the model is checked before its options): factories mm:make and
    mymodels:make, and files m.pt and m.onnx in the working directory."""
    for module in ("mm", "mymodels"):
        (tmp_path / f"{module}.py").write_text("def make():\n    return None\n")
    for name in ("m.pt", "m.onnx"):
        (tmp_path / name).write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))


def test_parse_shape() -> None:
    assert parse_shape("3,224,224") == [3, 224, 224] == parse_shape("3x224x224")
    assert parse_shape(None) is None
    with pytest.raises(SpecError, match="--shape"):
        parse_shape("3,a")
    with pytest.raises(SpecError, match="--shape"):
        parse_shape("0,3")


def test_user_input_options_are_refused_where_they_would_be_ignored() -> None:
    assert user_input_options("mymodels:make", "3x8", 50) == ([3, 8], 50)
    assert user_input_options("resnet50", None, None) == (None, None)
    with pytest.raises(SpecError, match="--shape: sets a user model's input; 'resnet50' takes --image instead"):
        user_input_options("resnet50", "3,64,64", None)
    # the zoo model's own kind: simplenet's had read "takes --seq or --image", beside --seq's "takes neither"
    with pytest.raises(SpecError, match="--shape: sets a user model's input; 'simplenet' has a fixed feature width"):
        user_input_options("simplenet", "3,4", None)
    with pytest.raises(SpecError, match="--vocab"):
        user_input_options("hf:some/dir", None, 100)


def test_seq_or_image_on_a_model_whose_input_shape_gives_is_refused_and_a_typo_is_not_blamed_on_shape() -> None:
    """`memory mm:make --shape 64 --seq 32` read "seq: must be >= 1 ..."; `memory mymodel --shape 64` (a typo of a
    zoo name) blamed --shape ("'mymodel' takes --seq or --image instead")."""
    with pytest.raises(SpecError, match=r"^--seq: mm:make takes the input --shape gives it .*: drop --seq$"):
        user_input_options("mm:make", "64", None, seq=32)
    with pytest.raises(SpecError, match=r"^--image: m\.pt takes the input --shape gives it"):
        user_input_options("m.pt", "64", None, image=32)
    assert user_input_options("m.onnx", None, None, seq=32) == (None, None)  # symbolic dims take --seq
    with pytest.raises(NotFoundError, match=r"^model 'mymodel' is not in the zoo"):
        user_input_options("mymodel", "64", None)


@pytest.mark.parametrize(
    ("ref", "says"),
    [
        ("/nonexistent.pt", r"^model: no file '/nonexistent\.pt'"),
        ("ort:/nonexistent.onnx", r"^model: no file '/nonexistent\.onnx'"),
        ("nonexistent_mod:factory", r"^model: cannot import module 'nonexistent_mod'"),
        ("mm:nothing", r"^model: 'mm' has no callable 'nothing'"),
        ("os:system", r"^model: os:system needs arguments \(command\); a factory is called with none"),
        ("bogusmodel", r"^model 'bogusmodel' is not in the zoo"),
        ("ort:/tmp", r"^model: '/tmp' is a folder without a config\.json; give a zoo name"),  # read "not in the zoo"
    ],
)
def test_the_models_own_problem_comes_before_a_missing_shape(ref: str, says: str) -> None:
    """`memory /nonexistent.pt` asked for --shape; given it, said there was no such file: two fixes for one."""
    with pytest.raises((SpecError, NotFoundError), match=says):
        user_input_options(ref, None, None)


def test_a_size_option_of_the_other_input_kind_is_refused_not_ignored() -> None:
    """``serve bert-base --image 224`` and ``memory resnet50 --seq 12`` ran on the defaults, silently."""
    assert user_input_options("bert-base", None, None, seq=64) == (None, None)
    assert user_input_options("ort:resnet50", None, None, image=160) == (None, None)
    with pytest.raises(SpecError, match=r"^--image: bert-base takes tokens input, set by --seq: drop --image"):
        user_input_options("bert-base", None, None, image=224)
    with pytest.raises(SpecError, match=r"^--seq: ort:resnet50 takes image input, set by --image: drop --seq"):
        user_input_options("ort:resnet50", None, None, seq=12)


def test_a_hugging_face_configs_input_kind_is_checked_too() -> None:
    """``serve hf:gpt2 --image 224`` served GPT-2 on the default length, silently: only zoo names were checked."""
    assert user_input_options("hf:gpt2", None, None, seq=64) == (None, None)
    assert user_input_options("hf:vit", None, None, image=160) == (None, None)
    with pytest.raises(SpecError, match=r"^--image: hf:gpt2 takes tokens input, set by --seq: drop --image"):
        user_input_options("hf:gpt2", None, None, image=224)
    with pytest.raises(SpecError, match=r"^--seq: hf:vit takes image input, set by --image: drop --seq"):
        user_input_options("hf:vit", None, None, seq=12)
    assert user_input_options("hf:not-a-type", None, None, seq=12) == (None, None)  # the build says what is wrong


def test_an_engine_prefix_reads_through_to_the_model_underneath() -> None:
    """`memory ort:mm:make --seq 64` read the spec's words ("input.shape: required ..."), not "drop --seq"."""
    with pytest.raises(SpecError, match=r"^--seq: ort:mm:make takes the input --shape gives it"):
        user_input_options("ort:mm:make", "32", None, seq=64)
    with pytest.raises(SpecError, match=r"^--shape: required for ov:mm:make"):
        user_input_options("ov:mm:make", None, None)
    assert user_input_options("ort:distilbert", None, None, seq=64) == (None, None)
    assert user_input_options("ort:m.onnx", None, None, seq=64) == (None, None)


def test_a_specs_user_input_on_a_zoo_model_is_refused_not_ignored() -> None:
    """`model: simplenet` with `input: {shape: [7, 3]}` planned simplenet's own 1,000 features, exit 0, as `memory
    simplenet --shape 3` refuses to."""
    from rightsize.models.byo import workload_model
    from rightsize.spec import parse_spec

    for model in ("simplenet", "ort:distilbert", "hf:bert"):
        for field, value in (("shape", [7, 3]), ("vocab_size", 500)):
            spec = parse_spec({"name": "z", "model": model, "input": {field: value}})
            with pytest.raises(SpecError, match=rf"^input\.{field}: sets a user model's input; '{model}' reads"):
                workload_model(spec)
    assert workload_model(parse_spec({"name": "z", "model": "simplenet", "tiny": True})).name == "simplenet"


@pytest.mark.parametrize(("text", "part"), [("32x", "32x"), ("32,x", "x"), ("x,32", "x"), ("3,x", "x"), ("3,,4", "")])
def test_parse_shape_names_the_part_it_cannot_read(text: str, part: str) -> None:
    """The empty or bad part had been dropped: "32x" and "x,32" ran as [32], "3,x" as [3]."""
    with pytest.raises(SpecError, match=f"^--shape: must be integers separated by commas \\(or x\\) like 3,224,224; "
                       f"{part!r} in {text!r} is not one$"):  # fmt: skip
        parse_shape(text)
