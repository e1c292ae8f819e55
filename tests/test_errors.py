"""One-line errors: the hint an input a model refuses gets."""

from __future__ import annotations


def test_an_image_size_refused_gets_an_image_models_hint() -> None:
    """`serve hf:vit --image 160` was told about token models' position tables."""
    from rightsize.errors import SpecError, input_refused

    err = input_refused("hf:vit", None, 160, ValueError("Input image size (160*160) doesn't match model (224*224)."))
    assert isinstance(err, SpecError) and "image models: a config's own image_size" in str(err)
    assert "token models" not in str(err)
    seq = input_refused("bert-base", 4096, None, IndexError("index out of range in self"))
    assert "token models: at most their position table" in str(seq)


def test_a_user_models_refused_shape_names_its_shape_not_seq_or_image() -> None:
    """`memory m.pt --vocab 100` was told "seq: cannot run 128 tokens (... position table, e.g. 512 for BERT)", and
    `--shape 31` on a feature model got the image models' hint: neither option applies to that model."""
    from rightsize.errors import SpecError, input_refused

    err = input_refused("m.pt", 128, None, RuntimeError("mat1 and mat2 shapes cannot be multiplied"), (31,))
    assert isinstance(err, SpecError) and str(err).startswith("input.shape: m.pt cannot run samples of shape [31]")
    assert "position table" not in str(err) and "image_size" not in str(err) and "--shape" in str(err)


def test_a_spec_error_survives_a_process_boundary() -> None:
    """A pool worker's SpecError reaches its parent as itself (pickle rebuilt it from the message and failed)."""
    import pickle

    from rightsize.errors import SpecError

    back = pickle.loads(pickle.dumps(SpecError("model", "f() raised ValueError")))
    assert isinstance(back, SpecError) and (back.field, back.problem, str(back)) == (
        "model",
        "f() raised ValueError",
        "model: f() raised ValueError",
    )
