"""measure.config.input_of: what of the input and the model a stored measurement's key names."""

import json
from pathlib import Path

import pytest

from rightsize.measure.config import input_of
from rightsize.spec import parse_spec


def _workload(model: str, **inp: object):  # type: ignore[no-untyped-def]
    return parse_spec({"model": model, "tiny": True, "input": inp, "batch_sizes": [1]})


def test_a_zoo_models_input_is_its_size_only() -> None:
    assert input_of(_workload("distilbert", seq_len=64), "tokens") == {"seq_len": 64}
    assert input_of(_workload("resnet50", image_size=160), "image") == {"image_size": 160}


def test_a_user_models_key_names_its_shape_vocab_and_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A changed input.shape or an edited factory module was planned from the old timings: the key had neither."""
    src = tmp_path / "revmodels.py"
    src.write_text("def make():\n    from torch import nn\n    return nn.Linear(8, 2)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    first = input_of(_workload("revmodels:make", shape=[8]), "features")
    assert set(first) == {"dim0", "rev"} and first["dim0"] == 8
    assert input_of(_workload("revmodels:make", shape=[8]), "features") == first  # unchanged: reused
    assert input_of(_workload("revmodels:make", shape=[16]), "features")["dim0"] == 16
    tokens = input_of(_workload("revmodels:make", shape=[6], dtype="int64", vocab_size=50), "tokens")
    assert tokens["vocab"] == 50 and tokens["dim0"] == 6
    src.write_text("def make():\n    from torch import nn\n    return nn.Linear(8, 4)\n")
    edited = input_of(_workload("revmodels:make", shape=[8]), "features")
    assert edited["dim0"] == 8 and edited["rev"] != first["rev"]


def test_an_edited_hugging_face_config_is_a_new_model(tmp_path: Path) -> None:
    d = tmp_path / "tinybert"
    d.mkdir()
    cfg = {"model_type": "bert", "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
           "intermediate_size": 64, "vocab_size": 100}  # fmt: skip
    (d / "config.json").write_text(json.dumps(cfg))
    before = input_of(_workload(f"hf:{d}", seq_len=16), "tokens")
    (d / "config.json").write_text(json.dumps(cfg | {"num_hidden_layers": 2}))
    after = input_of(_workload(f"hf:{d}", seq_len=16), "tokens")
    assert before["seq_len"] == after["seq_len"] == 16 and before["rev"] != after["rev"]
    assert "rev" not in input_of(_workload("hf:gpt2", seq_len=16), "tokens")  # a built-in name: fixed by transformers


def test_a_user_models_ops_are_traced_with_its_new_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """input_of's dim0/vocab/rev went on to trace_work as keywords it does not take: the TypeError was cached as
    "trace failed" and every user model's projection fell back to the coarse profile."""
    from rightsize.store import Store
    from rightsize.workflows.plan import work_profile

    (tmp_path / "tracedmodels.py").write_text("def make():\n    from torch import nn\n    return nn.Linear(8, 2)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with Store(tmp_path / "s.sqlite") as store:
        work = work_profile(_workload("tracedmodels:make", shape=[8]), store)
    assert work is not None and any(op[0] == "gemm" for op in work.ops)
