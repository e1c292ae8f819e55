"""Bring your own model: a Hugging Face config, a TorchScript file, an ONNX file or a Python factory.

    ref                         what it builds                              input
    hf:PATH | PATH/ (config.json) transformers model from the config, random weights   from the config
    hf:MODEL_TYPE (hf:roberta)  that type's default config                  from the config
    model.onnx                  an ONNX Runtime session (CPU)               read from the graph
    model.pt | .ts | .torchscript  torch.jit.load                           input.shape / input.dtype
    model.pt2                   torch.export.load(...).module()             input.shape / input.dtype
    ort:REF (ort:distilbert)    REF exported to ONNX once (cached), run on ONNX Runtime   as REF
    ov:REF                      the same on OpenVINO (REF may be a .onnx file)              as REF
    package.module:factory      factory() -> nn.Module                      input.shape / input.dtype

Every ref becomes a ``ZooEntry`` (the same record the zoo uses), so memory, bench, plan and serve
treat a user's model like a zoo one. Nothing is downloaded: a hub name gets an error saying how to
fetch its config.json once. ONNX graphs run on ONNX Runtime or OpenVINO (``rightsize.models.onnx_engine``). A
factory's import and call each stop after ``RIGHTSIZE_FACTORY_TIMEOUT_S`` seconds (``rightsize.models.time_limit``).
"""

from __future__ import annotations

import contextlib
import json
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rightsize.errors import NotFoundError, RightsizeError, SpecError, UnsupportedError, did_you_mean
from rightsize.inputfile import short
from rightsize.models.onnx_engine import OrtModule, exported_onnx, onnx_input
from rightsize.models.refs import ORT_PREFIX, OV_PREFIX, config_dir, without_engine
from rightsize.models.time_limit import FACTORY_TIMEOUT_ENV, TimeLimitExceeded, factory_timeout_s, time_limit
from rightsize.models.user_module import (
    check_declared_shape,
    check_module,
    exported_dims,
    load_factory,
    quiet_export_load,
    static_batch,
)
from rightsize.models.zoo import ZOO, Family, InputKind, ZooEntry, get_entry

if TYPE_CHECKING:
    from torch import nn

TORCHSCRIPT_SUFFIXES = (".pt", ".pth", ".ts", ".torchscript", ".jit")
DEFAULT_VOCAB = 1000  # token ids are drawn below this when neither the model nor the spec says


@dataclass(frozen=True)
class UserEntry(ZooEntry):
    """A user's model. ``user_shape`` fixes one sample's shape; empty means the zoo rules (seq_len, image_size)."""

    user_shape: tuple[int, ...] = ()
    fmt: str = "factory"  # factory | torchscript | onnx | hf
    fixed_batch: int | None = None  # an ONNX graph exported with a static batch dim runs that batch only

    def sample_shape(
        self, seq_len: int | None = None, image_size: int | None = None, tiny: bool = False
    ) -> tuple[int, ...]:
        if self.user_shape:
            return self.user_shape
        if self.kind == "image":
            size = image_size or self.default_image_size
            return (3, size, size)
        return (seq_len or self.default_seq_len,)

    def input_vocab(self, tiny: bool) -> int:
        return self.vocab_size  # a user's model has one size: tiny changes nothing

    def count_params(self, tiny: bool = False) -> int:
        if self.fmt in ("onnx", "torchscript", "export"):  # no meta-device build: count the loaded weights
            model = self.builder(tiny)
            return int(sum(p.numel() for p in model.parameters())) + int(getattr(model, "initializer_count", 0))
        return super().count_params(tiny)


def zoo_entry_of(ref: str) -> ZooEntry | None:
    """The zoo entry ``ref`` runs (``ort:``/``ov:`` prefixes read through); None for any other model."""
    return ZOO.get(without_engine(ref))


def input_kind_of(ref: str) -> InputKind | None:
    """The input kind of a zoo model (``ort:``/``ov:`` read through) or a Hugging Face config ("image" or "tokens");
    None for a model that does not say (a factory, a saved program) or a config that cannot be read (its command
    reports that)."""
    entry = zoo_entry_of(ref)
    if entry is not None:
        return entry.kind
    if ref.startswith("hf:") or config_dir(ref) is not None:
        try:
            return _hf_entry(ref).kind
        except RightsizeError:
            return None
    return None


ENGINE_PREFIX = {"onnxruntime": ORT_PREFIX, "openvino": OV_PREFIX}


def engine_ref(ref: str, engine: str) -> str:
    """The model ref that runs ``ref`` on ``engine`` ("torch": ``ref`` itself; "onnxruntime": ``ort:ref``)."""
    if engine == "torch" or ref.startswith((ORT_PREFIX, OV_PREFIX)):
        return ref
    if ref.endswith(".onnx"):
        return ref if engine == "onnxruntime" else OV_PREFIX + ref
    return ENGINE_PREFIX[engine] + ref


ENGINE_NAMES = {"torch": "PyTorch eager", "onnxruntime": "ONNX Runtime", "openvino": "OpenVINO"}


def engine_of(ref: str) -> str:
    """The engine a model ref runs on (``engine_ref``'s inverse): "onnxruntime", "openvino" or "torch"."""
    if ref.startswith(OV_PREFIX):
        return "openvino"
    return "onnxruntime" if ref.startswith(ORT_PREFIX) or ref.endswith(".onnx") else "torch"


def is_user_ref(ref: str) -> bool:
    """Whether ``ref`` names a user's model (anything but a zoo name)."""
    return ":" in ref or ref.endswith((".onnx", ".pt2", *TORCHSCRIPT_SUFFIXES)) or config_dir(ref) is not None


def is_factory_ref(ref: str) -> bool:
    """Whether ``ref`` (on any engine) builds its model by calling a user's ``package.module:factory``."""
    for prefix in ENGINE_PREFIX.values():
        ref = ref.removeprefix(prefix)
    return (":" in ref and not ref.startswith("hf:") and config_dir(ref) is None
            and not ref.endswith((".onnx", ".pt2", *TORCHSCRIPT_SUFFIXES)))  # fmt: skip


def resolve_model(ref: str, shape: list[int] | None = None, vocab: int | None = None) -> ZooEntry:
    """A zoo entry, or a user's model (see the module docstring). ``shape`` is one sample's input shape;
    ``vocab`` set means token-id inputs."""
    if not is_user_ref(ref):
        return get_entry(ref)
    return resolve_user(ref, shape, vocab)


def workload_model(workload: Any) -> ZooEntry:
    """The entry a spec's ``model`` and ``input`` name (``Workload``; typed Any to keep this module spec-free); a
    SpecError when the input is past what the model takes (``ZooEntry.check_seq_len``)."""
    inner = without_engine(workload.model)
    own_input = inner in ZOO or inner.startswith("hf:") or config_dir(inner) is not None
    for field, value in (("input.shape", workload.input.shape), ("input.vocab_size", workload.input.vocab_size)):
        if value is not None and own_input:  # ignored, silently: `shape: [7, 3]` planned simplenet's 1,000 features
            raise SpecError(field, f"sets a user model's input; {workload.model!r} reads input.seq_len or "
                            "input.image_size (or has a fixed input): drop it")  # fmt: skip
    entry = resolve_model(workload.model, workload.input.shape, workload.input.token_vocab())
    entry.check_seq_len(workload.input.seq_len, workload.tiny)
    return entry


def resolve_user(ref: str, shape: list[int] | None = None, vocab: int | None = None) -> ZooEntry:
    """The entry for a user's model ref (see the module docstring); ``vocab`` set means token-id inputs."""
    if ref.startswith((ORT_PREFIX, OV_PREFIX)):
        return _engine_entry(ref, shape, vocab)
    if ref.startswith("hf:") or config_dir(ref) is not None:
        return _hf_entry(ref)
    if ref.endswith(".onnx"):
        return _onnx_entry(ref, shape, vocab)
    if ref.endswith(TORCHSCRIPT_SUFFIXES):
        return _torchscript_entry(ref, shape, vocab)
    if ref.endswith(".pt2"):
        return _exported_entry(ref, shape, vocab)
    return _factory_entry(ref, shape, vocab)


def _float_or_tokens(ref: str, shape: list[int] | None, vocab: int | None) -> dict[str, Any]:
    """Entry fields for a model whose input the spec describes: float [shape] or token ids below ``vocab``."""
    if vocab is not None:
        seq = tuple(shape) if shape else ()
        return {"kind": "tokens", "vocab_size": vocab, "user_shape": seq, "features": seq[0] if seq else 1}
    if not shape:
        raise SpecError(
            "input.shape",
            f"required for {ref}: give the per-sample input shape, e.g. [3, 224, 224], or input.dtype: int64 "
            "for token ids",
        )
    return {"kind": "features", "user_shape": tuple(shape), "features": shape[0]}


# --- package.module:factory ----------------------------------------------------------------------


def _factory_entry(ref: str, shape: list[int] | None, vocab: int | None) -> UserEntry:
    factory = load_factory(ref)

    def build(tiny: bool) -> nn.Module:
        limit = factory_timeout_s()
        try:
            with contextlib.redirect_stdout(sys.stderr), time_limit(limit):
                model = factory()
        except TimeLimitExceeded:  # a loop or a blocking call: `memory` and `bench` hung for ever
            raise SpecError("model", f"{ref}() has not returned after {limit:g} s; a factory must build and return "
                            "the torch.nn.Module (check it for a loop or a blocking call), or allow more with "
                            f"{FACTORY_TIMEOUT_ENV}=SECONDS") from None  # fmt: skip
        except SystemExit as exc:  # a factory that calls sys.exit() would end rightsize silently, exit 0
            raise SpecError("model", f"{ref}() called sys.exit({exc.code!r}); a factory must return the "
                            "torch.nn.Module") from None  # fmt: skip
        except Exception as exc:  # its own failure, before any input: not the input's (memory blamed --seq)
            raise SpecError("model", f"{ref}() raised {type(exc).__name__}: {short(str(exc))}; fix that "
                            "factory") from None  # fmt: skip
        return check_module(f"{ref}()", model)

    return UserEntry(ref, "user", description=f"user model {ref}", builder=build, hf=False,
                     **_float_or_tokens(ref, shape, vocab))  # fmt: skip


# --- TorchScript ---------------------------------------------------------------------------------


def _torchscript_entry(ref: str, shape: list[int] | None, vocab: int | None) -> UserEntry:
    path = _existing_file(ref)

    def build(tiny: bool) -> nn.Module:
        import torch

        try:
            return check_module(ref, torch.jit.load(str(path), map_location="cpu"))
        except RuntimeError as exc:
            first = str(exc).strip().splitlines()[0].split(". ")[0][:120] if str(exc).strip() else type(exc).__name__
            raise SpecError(
                "model", f"{ref} is not a TorchScript archive ({first}); save one with "
                "torch.jit.save(torch.jit.trace(model, example), path)"
            ) from None  # fmt: skip

    build(False)  # fail now, before any sweep (and before asking for its input shape), on a file that is not one
    return UserEntry(ref, "user", description=f"TorchScript {path.name}", builder=build, hf=False, fmt="torchscript",
                     **_float_or_tokens(ref, shape, vocab))  # fmt: skip


def _exported_entry(ref: str, shape: list[int] | None, vocab: int | None) -> UserEntry:
    """A ``torch.export`` program (``torch.export.save``), TorchScript's successor in PyTorch 2.x."""
    path = _existing_file(ref)

    def build(tiny: bool) -> nn.Module:
        import torch

        try:
            with quiet_export_load():
                program = torch.export.load(str(path))
            module = check_module(ref, program.module())
        except (RuntimeError, ValueError, KeyError, OSError) as exc:
            raise SpecError(
                "model", f"{ref} is not a torch.export archive ({type(exc).__name__}); save one with "
                "torch.export.save(torch.export.export(model, (example,)), path)"
            ) from None  # fmt: skip
        if (fixed := static_batch(program)) is not None:  # every other batch failed a guard, in a 147-line traceback
            dynamic = "dynamic_shapes=({0: torch.export.Dim('batch')},)"
            raise SpecError("model", f"{ref} was exported for batch {fixed} only; re-export it with a dynamic batch: "
                            f"torch.export.export(model, (x,), {dynamic})")  # fmt: skip
        check_declared_shape(ref, tuple(shape or ()), exported_dims(program))  # a failed guard's traceback, else
        # An exported program is traced in one mode and refuses train()/eval(); the wrapper's eval() reaches it.
        module.train = types.MethodType(lambda self, mode=True: self, module)  # type: ignore[method-assign]
        return module

    build(False)
    return UserEntry(ref, "user", description=f"torch.export {path.name}", builder=build, hf=False, fmt="export",
                     **_float_or_tokens(ref, shape, vocab))  # fmt: skip


def check_model_ref(ref: str) -> None:
    """Refuse what ``ref`` names before its input options are read and before anything loads: a name not in the
    zoo, a file that is not there, a factory that cannot be imported or called. ``--shape`` had been asked for
    first (the user fixed it, then learnt the file did not exist), and `serve` had announced loading a typo."""
    ref = without_engine(ref)
    if not is_user_ref(ref):
        get_entry(ref)
    elif ref.startswith("hf:") or config_dir(ref) is not None:
        return  # read when resolved: its errors name the config
    elif ref.endswith((".onnx", ".pt2", *TORCHSCRIPT_SUFFIXES)):
        _existing_file(ref)
    else:
        load_factory(ref)


def _existing_file(ref: str) -> Path:
    path = Path(ref)
    if not path.is_file():
        raise NotFoundError(f"model: no file {ref!r}; give the path of your .onnx, TorchScript (.pt) or torch.export "
                            "(.pt2) file")  # fmt: skip
    return path


# --- Hugging Face config ---------------------------------------------------------------------------


def _hf_config(ref: str) -> Any:
    from transformers import CONFIG_MAPPING, AutoConfig

    from rightsize.hf_config import check_hf_config
    from rightsize.inputfile import read_user_text, short

    directory = config_dir(ref)
    if directory is not None:
        field = f"{directory / 'config.json'}"
        try:
            data = json.loads(read_user_text(directory / "config.json", "transformers config.json"))
        except json.JSONDecodeError as exc:
            raise SpecError(field, f"is not valid JSON ({exc.msg} at line {exc.lineno})") from None
        except ValueError:  # an integer of thousands of digits
            raise SpecError(field, "holds a number too long to read; give each value its real size") from None
        except RecursionError:
            raise SpecError(field, "nests too deeply to read; a transformers config.json is a flat mapping") from None
        if not isinstance(data, dict) or not isinstance(data.get("model_type"), str):
            raise SpecError(field, 'needs a "model_type" (e.g. "bert"), as every transformers config.json has')
        model_type = data.pop("model_type")
        if model_type not in CONFIG_MAPPING:
            raise SpecError(f"{field}: model_type", f"{short(model_type)} is not known to this transformers version"
                            f"{did_you_mean(model_type, CONFIG_MAPPING.keys())}")  # fmt: skip
        data.update(check_hf_config(data, field))  # the common dimensions: whole numbers in range, heads that fit
        try:
            return AutoConfig.for_model(model_type, **data)
        except _config_errors() as exc:
            raise SpecError(field, f"transformers refused it ({_first_line(exc)}); fix that value") from None
    name = ref[3:] if ref.startswith("hf:") else ref
    if name in CONFIG_MAPPING:
        return CONFIG_MAPPING[name]()
    if name.startswith((".", "/", "~")):  # a folder that is not there: `download ./bert-base-uncased` is no hub id
        folder = Path(name).expanduser()
        raise NotFoundError(
            f"model: {ref!r}: no folder {short(str(folder))} holding config.json here. rightsize never downloads: "
            f"fetch a hub model's config into it once (`hf download ORG/MODEL config.json --local-dir {short(name)}`, "
            f"e.g. google-bert/{folder.name}; huggingface_hub < 1.0: huggingface-cli download), or pass a type like "
            f"hf:bert"
        )
    raise NotFoundError(
        f"model: {ref!r} is neither a directory holding config.json nor a transformers model type."
        f"{did_you_mean(name, CONFIG_MAPPING.keys())} rightsize never downloads: fetch a hub model's config once "
        f"(`hf download {name} config.json --local-dir DIR`; huggingface_hub < 1.0: huggingface-cli download) and "
        f"pass hf:DIR, or pass a type like hf:bert"
    )


def _config_errors() -> tuple[type[Exception], ...]:
    """What constructing a transformers config or model raises on a value it cannot take (0 heads:
    ZeroDivisionError; a string for a size: TypeError; a null where transformers >= 5 types an int: huggingface_hub's
    StrictDataclassError)."""
    errors: tuple[type[Exception], ...] = (TypeError, ValueError, ArithmeticError, RecursionError, AttributeError,
                                           KeyError, IndexError)  # fmt: skip
    try:
        from huggingface_hub.errors import StrictDataclassError
    except ImportError:  # huggingface_hub < 1.0: no strict dataclasses
        return errors
    return (*errors, StrictDataclassError)


def _first_line(exc: BaseException) -> str:
    """``Type: message`` of an exception on one line, at most 160 characters: a one-line error's detail."""
    text = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())[:160]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _hf_entry(ref: str) -> UserEntry:
    from transformers.models.auto import modeling_auto as auto

    cfg = _hf_config(ref)
    model_type = cfg.model_type
    masked_lm = auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES  # encoders (BERT) also have causal-LM heads
    family: Family
    kind: InputKind
    factory: Any
    if model_type in auto.MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES:
        family, kind, lm, factory = "cnn", "image", False, auto.AutoModelForImageClassification
    elif model_type in auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and model_type not in masked_lm:
        family, kind, lm, factory = "decoder", "tokens", True, auto.AutoModelForCausalLM
    elif model_type in auto.MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES:
        family, kind, lm, factory = "encoder", "tokens", False, auto.AutoModelForSequenceClassification
    else:
        raise UnsupportedError(
            f"model: {ref} is a {model_type!r} model; rightsize builds image classifiers, sequence classifiers and "
            "causal LMs from configs. Wrap other heads in a package.module:factory"
        )
    image = getattr(cfg, "image_size", 224)
    image = image[0] if isinstance(image, (list, tuple)) and image else image  # [height, width]
    max_pos = getattr(cfg, "max_position_embeddings", None) or 512
    cap = learned_positions(cfg)
    source = f"{directory / 'config.json'}" if (directory := config_dir(ref)) is not None else ref
    errors: tuple[type[Exception], ...] = (*_config_errors(), RuntimeError)

    def build(tiny: bool) -> nn.Module:
        import torch

        try:
            return factory.from_config(cfg)
        except torch.OutOfMemoryError:
            raise
        except errors as exc:  # a value the model cannot be built with
            raise SpecError(source, f"cannot build the model ({_first_line(exc)}); fix the config") from None

    return UserEntry(
        ref, family, kind, f"{cfg.__class__.__name__} from {ref}", build, hf=True, lm=lm, fmt="hf",
        classes=int(getattr(cfg, "num_labels", 2)), vocab_size=int(getattr(cfg, "vocab_size", 0) or DEFAULT_VOCAB),
        default_seq_len=min(128, int(max_pos)), default_image_size=image if isinstance(image, int) else 224,
        max_positions=cap,
    )  # fmt: skip


# Model types with a learned position table (a longer input fails on every config with an index error); the RoBERTa
# family numbers positions from pad_token_id + 1, so it runs pad_token_id + 1 fewer tokens than its table has rows.
# Rotary and relative-position models (llama, T5, ...) run past max_position_embeddings and are not capped.
_LEARNED = {"bert", "distilbert", "albert", "electra", "gpt2", "gpt_neo", "opt"}
_PADDED = {"roberta", "xlm-roberta", "camembert", "mpnet", "data2vec-text"}


def learned_positions(cfg: Any) -> int | None:
    """The longest input ``cfg``'s model takes (``ZooEntry.max_positions``), or None where nothing caps it."""
    rows = getattr(cfg, "n_positions", None) or getattr(cfg, "max_position_embeddings", None)
    if not rows or cfg.model_type not in _LEARNED | _PADDED:
        return None
    return int(rows) - (int(getattr(cfg, "pad_token_id", None) or 0) + 1 if cfg.model_type in _PADDED else 0)


# --- ONNX ------------------------------------------------------------------------------------------


def _onnx_entry(ref: str, shape: list[int] | None, vocab: int | None) -> UserEntry:
    path = _existing_file(ref)
    info = onnx_input(path)
    if shape:  # ONNX Runtime's "invalid dimensions" traceback at the first forward, else
        check_declared_shape(ref, tuple(shape), info.dims)
    if info.tokens:
        fields: dict[str, Any] = {"kind": "tokens", "vocab_size": vocab or info.vocab or DEFAULT_VOCAB}
        fixed = info.fixed_shape()
        fields["user_shape"] = tuple(shape) if shape else (fixed or ())
    else:
        if vocab is not None:  # ignored, silently: the graph's input is float
            raise SpecError("input.vocab_size", f"only applies to token-id inputs; {ref} takes a float input (its "
                            "graph says): drop --vocab (input.vocab_size / input.dtype: int64 in a spec)")  # fmt: skip
        fixed = info.fixed_shape()
        if not shape and fixed is None:
            raise SpecError("input.shape", f"{ref} has symbolic input dims {info.dims[1:]}; give the per-sample shape")
        fields = {"kind": "features", "user_shape": tuple(shape) if shape else fixed}
    fields["features"] = fields["user_shape"][0] if fields["user_shape"] else 1
    if info.dims and isinstance(info.dims[0], int) and info.dims[0] > 0:
        fields["fixed_batch"] = info.dims[0]

    def build(tiny: bool) -> nn.Module:
        return OrtModule.load(path)

    return UserEntry(ref, "user", description=f"ONNX {path.name} (ONNX Runtime)", builder=build, hf=False, fmt="onnx",
                     **fields)  # fmt: skip


@dataclass(frozen=True)
class EngineEntry(ZooEntry):
    """``base`` (any PyTorch model ref) exported to ONNX and run on ONNX Runtime; inputs exactly as ``base``."""

    base: Any = None

    def sample_shape(
        self, seq_len: int | None = None, image_size: int | None = None, tiny: bool = False
    ) -> tuple[int, ...]:
        return tuple(self.base.sample_shape(seq_len, image_size, tiny))

    def input_vocab(self, tiny: bool) -> int:
        return int(self.base.input_vocab(tiny))

    def example_labels(self, x: Any, tiny: bool = False, seed: int = 1) -> Any:
        return self.base.example_labels(x, tiny, seed)

    def count_params(self, tiny: bool = False) -> int:
        return int(self.base.count_params(tiny))


def _engine_entry(ref: str, shape: list[int] | None, vocab: int | None) -> EngineEntry:
    engine = "openvino" if ref.startswith(OV_PREFIX) else "onnxruntime"
    inner = ref.split(":", 1)[1]
    if inner.endswith(".onnx"):
        if engine == "onnxruntime":
            raise SpecError("model", f"{ref}: the model is already ONNX; drop the {ORT_PREFIX} prefix")
        base: ZooEntry = _onnx_entry(inner, shape, vocab)
        path = Path(inner)

        def build(tiny: bool) -> nn.Module:
            return OrtModule.load(path, engine)

    else:
        base = resolve_model(inner, shape, vocab)
        if base.meta_only:
            raise UnsupportedError(f"model: {base.name} is too big to build here, so it cannot be exported to ONNX")

        def build(tiny: bool) -> nn.Module:
            return OrtModule.load(exported_onnx(base, tiny), engine)

    label = ENGINE_NAMES[engine]
    return EngineEntry(ref, base.family, base.kind, f"{base.description} on {label}", build, hf=False,
                       lm=base.lm, classes=base.classes, vocab_size=base.vocab_size, features=base.features,
                       default_seq_len=base.default_seq_len, default_image_size=base.default_image_size,
                       max_positions=base.max_positions, base=base)  # fmt: skip


__all__ = [
    "ENGINE_NAMES", "ORT_PREFIX", "OV_PREFIX", "TORCHSCRIPT_SUFFIXES", "EngineEntry", "UserEntry", "check_model_ref",
    "engine_of",
    "engine_ref", "is_user_ref", "resolve_model", "resolve_user", "workload_model",
]  # fmt: skip
