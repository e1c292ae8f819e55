import pytest
import torch

from rightsize.errors import NotFoundError
from rightsize.models import get_entry, list_entries

EXPECTED_PARAMS_M = {"resnet50": 25.56, "bert-base": 109.48, "distilbert": 66.96, "gpt2": 124.44, "mobilenet_v2": 3.50,
                     "resnet152": 60.19, "simplenet": 0.646}  # fmt: skip


@pytest.mark.parametrize("name", sorted(EXPECTED_PARAMS_M))
def test_full_size_parameter_counts(name: str) -> None:
    assert get_entry(name).count_params() / 1e6 == pytest.approx(EXPECTED_PARAMS_M[name], rel=0.01)


@pytest.mark.parametrize(
    "entry", [e for e in list_entries() if e.name not in ("llama-7b", "llama-13b")], ids=lambda e: e.name
)
def test_tiny_variants_run_forward_and_loss(entry) -> None:  # type: ignore[no-untyped-def]
    model = entry.build(tiny=True)
    x = entry.example_input(3, seq_len=16, image_size=32, tiny=True)
    logits = model(x)
    assert logits.shape[0] == 3
    loss = model.loss(x, entry.example_labels(x, tiny=True))
    assert loss.ndim == 0 and torch.isfinite(loss)


def test_unknown_model_suggests() -> None:
    with pytest.raises(NotFoundError, match="Did you mean 'resnet50'"):
        get_entry("resnet5")


def test_a_user_factory_must_return_a_module() -> None:
    from rightsize.errors import SpecError
    from rightsize.models import resolve_model

    entry = resolve_model("os:getcwd", [3])  # callable, but not a model factory
    with pytest.raises(SpecError, match=r"returned str, not a torch\.nn\.Module"):
        entry.builder(False)
    built = resolve_model("torch.nn:Identity", [3]).builder(False)
    assert built.__class__.__name__ == "Identity"


def test_a_sequence_past_the_position_table_is_refused_before_measuring() -> None:
    """`input.seq_len: 100000` on DistilBERT failed every config after minutes ("size of tensor a (100000) must
    match ... (512)"): a one-line error on the field instead, and the caps are the built configs' own."""
    from rightsize.errors import SpecError
    from rightsize.models import resolve_model, workload_model
    from rightsize.spec import parse_spec

    def spec(model: str, seq: int, tiny: bool = False) -> object:
        return parse_spec({"model": model, "input": {"seq_len": seq}, "tiny": tiny})

    with pytest.raises(SpecError, match=r"^input\.seq_len: 100000 is past distilbert's 512 positions; use at most"):
        workload_model(spec("distilbert", 100_000))
    with pytest.raises(SpecError, match="past gpt2's 1024 positions"):
        workload_model(spec("gpt2", 1025))
    assert workload_model(spec("distilbert", 512)).name == "distilbert"
    assert workload_model(spec("distilbert", 100_000, tiny=True)).name == "distilbert"  # tiny runs 16 tokens at most
    assert workload_model(spec("simplenet", 100_000)).name == "simplenet"  # not a token model: seq_len is unused
    assert resolve_model("ort:bert-base").max_positions == 512  # the same model on ONNX Runtime
    with pytest.raises(SpecError, match=r"^input\.seq_len: 513 is past hf:bert's 512 positions"):  # a user's config
        workload_model(spec("hf:bert", 513))
    with pytest.raises(SpecError, match="past hf:roberta's 510 positions"):  # positions start after pad_token_id
        workload_model(spec("hf:roberta", 511))
    assert workload_model(spec("hf:llama", 100_000)).max_positions is None  # rotary: nothing caps it
    for name in ("distilbert", "bert-base", "gpt2"):
        entry = get_entry(name)
        with torch.device("meta"):
            built = entry.builder(False)
        assert entry.max_positions == built.config.max_position_embeddings, name


def test_every_build_of_a_zoo_model_is_the_same_model() -> None:
    """A pipeline's workers (and `serve --workers 2`'s) each built their own random weights: item 0 scored 0.547,
    0.604 and 0.590 in three runs. Builds are seeded; the caller's random stream is left where it was."""
    import torch

    from rightsize.models import resolve_model

    entry = resolve_model("distilbert")
    torch.manual_seed(123)
    untouched = torch.rand(3)
    torch.manual_seed(123)
    a = entry.build(tiny=True)
    assert torch.equal(torch.rand(3), untouched)  # the build drew nothing from the caller's stream
    torch.manual_seed(456)  # another worker, another random state
    b = entry.build(tiny=True)
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
    x = entry.example_input(2, tiny=True)
    with torch.no_grad():
        assert torch.equal(a(x), b(x))
