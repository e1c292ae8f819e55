"""The command-line options that describe a model's input (``serve`` and ``memory``): ``--shape`` and ``--vocab``
for a user's model, ``--seq`` and ``--image`` for a zoo model or a Hugging Face config; each refused, naming the
option, where the model would ignore it."""

from __future__ import annotations

from rightsize.errors import SpecError
from rightsize.models.byo import check_model_ref, config_dir, input_kind_of, is_user_ref, without_engine
from rightsize.models.zoo import ZOO


def parse_shape(text: str | None, option: str = "--shape") -> list[int] | None:
    """``"3,224,224"`` (or ``3x224x224``) -> [3, 224, 224]; a SpecError naming ``option`` otherwise."""
    if not text:
        return None
    dims: list[int] = []
    for part in text.split(","):
        try:  # every part: "32x" and "3,x" had dropped the empty or bad one and run as [32] and [3]
            dims += [int(d) for d in part.split("x")]
        except ValueError:
            raise SpecError(option, f"must be integers separated by commas (or x) like 3,224,224; {part.strip()!r} "
                            f"in {text!r} is not one") from None  # fmt: skip
    if not dims or any(not 1 <= d <= 1_000_000 for d in dims) or len(dims) > 8:
        raise SpecError(option, f"needs 1-8 dimensions, each 1..1000000, got {text!r}")
    return dims


_TAKES = {"image": "--image", "tokens": "--seq", "features": "neither --seq nor --image (a fixed feature width)"}


def user_input_options(
    ref: str, shape: str | None, vocab: int | None, seq: int | None = None, image: int | None = None
) -> tuple[list[int] | None, int | None]:
    """``--shape`` and ``--vocab`` parsed for model ``ref``; a SpecError naming the option when ``ref`` is a zoo
    model or a Hugging Face config (their input is set by ``--seq`` / ``--image``), which would ignore them, and
    when a zoo model's input is not the kind ``--seq`` / ``--image`` sets (``--image`` on a text model). The model
    itself is checked first (``check_model_ref``): its problem is the one to fix."""
    check_model_ref(ref)
    takes = input_kind_of(ref) if seq is not None or image is not None else None
    for option, value, kind in (("--seq", seq, "tokens"), ("--image", image, "image")):
        if takes is not None and value is not None and takes != kind:
            raise SpecError(option, f"{ref} takes {takes} input, set by {_TAKES[takes]}: drop {option}")
    dims = parse_shape(shape)
    given = [option for option, value in (("--shape", dims), ("--vocab", vocab)) if value is not None]
    # a name neither in the zoo nor a user's reference was refused above (this blamed --shape for a typo)
    if given and (ref.startswith("hf:") or config_dir(ref) is not None or ref in ZOO):
        zoo_kind = input_kind_of(ref) if ref in ZOO else None  # its own kind ('simplenet': neither option)
        own = {"image": "takes --image instead", "tokens": "takes --seq instead", "features": "has a fixed feature "
               "width"}.get(zoo_kind or "", "takes --seq or --image instead")  # fmt: skip
        raise SpecError(given[0], f"sets a user model's input; {ref!r} {own}: drop it")
    # on ONNX Runtime / OpenVINO, the model underneath decides (`ort:mm:make` is a factory: --shape, not --seq)
    inner = without_engine(ref)
    reads_its_input = inner.startswith("hf:") or inner.endswith(".onnx") or config_dir(inner) or inner in ZOO
    for option, value in (("--seq", seq), ("--image", image)):
        if value is not None and is_user_ref(ref) and not reads_its_input:
            raise SpecError(option, f"{ref} takes the input --shape gives it (and --vocab for token ids): drop "
                            f"{option}")  # fmt: skip
    if not given and is_user_ref(ref) and not reads_its_input:
        # a factory or a saved program does not say what it takes (``_float_or_tokens``, in the spec's words)
        raise SpecError("--shape", f"required for {ref}: give the per-sample input shape, e.g. --shape 3,224,224, "
                        "or --vocab N for token ids below N")  # fmt: skip
    return dims, vocab
