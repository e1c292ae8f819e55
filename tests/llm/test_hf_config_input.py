"""Hostile ``hf:DIR`` decoder configs: every bad dimension is a one-line SpecError naming the config.json key, never a
traceback, a hang or a nonsensical plan (``llm.shape.decoder_shape`` for finetune / plan, ``models.byo`` for memory).
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from rightsize.errors import SpecError
from rightsize.hf_config import HF_CONFIG_CAPS, check_hf_config
from rightsize.llm.shape import DecoderShape, decoder_shape

LLAMA: dict[str, Any] = {
    "model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 4,
    "num_hidden_layers": 2, "intermediate_size": 256, "vocab_size": 1000,
}  # fmt: skip
GPT2: dict[str, Any] = {"model_type": "gpt2", "n_layer": 2, "n_embd": 64, "n_head": 4, "vocab_size": 1000}


def _config_dir(tmp_path: Path, data: Any, name: str = "cfg") -> Path:
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(data if isinstance(data, str) else json.dumps(data))  # NaN/Infinity as JSON does
    return d


BAD: list[tuple[dict[str, Any], str, str]] = [
    ({"num_attention_heads": 0}, "num_attention_heads", "got 0"),
    ({"num_hidden_layers": 0}, "num_hidden_layers", "got 0"),
    ({"num_key_value_heads": 0}, "num_key_value_heads", "got 0"),
    ({"vocab_size": 0}, "vocab_size", "got 0"),
    ({"vocab_size": -5}, "vocab_size", "got -5"),
    ({"intermediate_size": 0}, "intermediate_size", "got 0"),
    ({"hidden_size": math.nan}, "hidden_size", "got nan"),
    ({"hidden_size": math.inf}, "hidden_size", "got inf"),
    ({"hidden_size": 1e300}, "hidden_size", "got 1e+300"),
    ({"hidden_size": None}, "hidden_size", "missing or null"),
    ({"hidden_size": [2048]}, "hidden_size", "got [2048]"),
    ({"hidden_size": "big"}, "hidden_size", "got 'big'"),
    ({"hidden_size": True}, "hidden_size", "got True"),
    ({"hidden_size": 64.5}, "hidden_size", "got 64.5"),
    ({"vocab_size": 10**400}, "vocab_size", "got 1000"),
    ({"hidden_size": -2048}, "hidden_size", "got -2048"),
    ({"hidden_size": 1_000_001}, "hidden_size", "1 to 1,000,000"),
    ({"head_dim": 0}, "head_dim", "got 0"),
    ({"num_key_value_heads": -8}, "num_key_value_heads", "got -8"),
    ({"num_key_value_heads": 3}, "num_key_value_heads", "divisor of num_attention_heads (4)"),
    ({"num_key_value_heads": 8}, "num_key_value_heads", "divisor of num_attention_heads (4)"),
    ({"num_attention_heads": 128, "num_key_value_heads": 128}, "num_attention_heads", "more than hidden_size"),
    ({"tie_word_embeddings": "no"}, "tie_word_embeddings", "true or false"),
    # heads that do not split hidden_size, with no head_dim: named, not a later "shape: head_dim 132 x heads 31"
    ({"model_type": "llama", "num_attention_heads": 3, "num_key_value_heads": 3}, "num_attention_heads", "divide"),
    ({"model_type": "gpt2", "n_layer": 0, "n_embd": 64, "n_head": 4}, "n_layer", "got 0"),
    ({"model_type": "gpt2", "n_layer": 2, "n_embd": 64, "n_head": 3}, "n_head", "does not divide n_embd"),
    ({"model_type": "gpt2", "n_layer": 2, "n_embd": 64, "n_head": 4, "n_positions": -1}, "n_positions", "got -1"),
]


@pytest.mark.parametrize(("change", "key", "match"), BAD, ids=[f"{b[1]}={b[0].get(b[1])!r}"[:40] for b in BAD])
def test_a_bad_dimension_is_a_spec_error_naming_the_key(
    tmp_path: Path, change: dict[str, Any], key: str, match: str
) -> None:
    data = {**LLAMA, **change}
    if "n_layer" in change:  # GPT-2 naming: drop the Llama keys
        data = {k: v for k, v in data.items() if k in change or k == "vocab_size"}
    with pytest.raises(SpecError, match=re.escape(match)) as info:
        decoder_shape(f"hf:{_config_dir(tmp_path, data)}")
    assert info.value.field == f"config.json: {key}"
    assert "\n" not in str(info.value) and len(str(info.value)) < 300


@pytest.mark.parametrize(
    ("change", "key", "match"),
    [b for b in BAD if "model_type" not in b[0] and b[1] not in ("hidden_size", "tie_word_embeddings")],
)
def test_the_memory_path_checks_the_same_keys(tmp_path: Path, change: dict[str, Any], key: str, match: str) -> None:
    """``rightsize memory hf:DIR`` builds the model with transformers: the same keys are refused first."""
    from rightsize.models.byo import resolve_model

    d = _config_dir(tmp_path, {**LLAMA, **change})
    with pytest.raises(SpecError, match=re.escape(match)) as info:
        resolve_model(f"hf:{d}")
    assert info.value.field == f"{d / 'config.json'}: {key}"


def test_memory_path_turns_a_transformers_refusal_into_one_line(tmp_path: Path) -> None:
    from rightsize.models.byo import resolve_model

    d = _config_dir(tmp_path, {**LLAMA, "rms_norm_eps": {"a": 1}})
    with pytest.raises(SpecError, match=r"config\.json: transformers refused it") as info:
        resolve_model(f"hf:{d}").count_params()
    assert "\n" not in str(info.value)


def _refused_by_both(ref: str, match: str) -> None:
    """The decoder resolver (finetune, generative targets) and the user-model resolver (plan, memory) refuse
    ``ref`` alike."""
    from rightsize.models.byo import resolve_model

    for resolve in (decoder_shape, resolve_model):
        with pytest.raises(SpecError, match=match):
            resolve(ref)


def test_a_fifo_config_is_refused_at_once(tmp_path: Path) -> None:
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    d = tmp_path / "fifo"
    d.mkdir()
    os.mkfifo(d / "config.json")
    start = time.monotonic()
    _refused_by_both(f"hf:{d}", "not a regular file")
    with pytest.raises(SpecError, match="not a regular file"):
        decoder_shape(f"hf:{d / 'config.json'}")
    assert time.monotonic() - start < 5


def test_deep_nesting_and_broken_json_are_spec_errors(tmp_path: Path) -> None:
    _refused_by_both(f"hf:{_config_dir(tmp_path, '[' * 100_000, 'deep')}", "nests too deeply")
    long = _config_dir(tmp_path, '{"vocab_size": 1' + "0" * 5000 + "}", "long")
    _refused_by_both(f"hf:{long}", "number too long")
    with pytest.raises(SpecError, match="not valid JSON"):
        decoder_shape(f"hf:{_config_dir(tmp_path, '{not json', 'broken')}")
    with pytest.raises(SpecError, match=r"config\.json holds a JSON list, not an object of fields"):
        decoder_shape(f"hf:{_config_dir(tmp_path, [1, 2], 'list')}")  # it read "has no layer count"
    with pytest.raises(SpecError, match="no decoder config"):
        decoder_shape(f"hf:{tmp_path / 'missing'}")


def test_valid_configs_still_resolve(tmp_path: Path) -> None:
    mistral = {
        "model_type": "mistral", "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
        "num_hidden_layers": 32, "intermediate_size": 14336, "vocab_size": 32000, "head_dim": None,
        "max_position_embeddings": 32768,
    }  # fmt: skip
    s = decoder_shape(f"hf:{_config_dir(tmp_path, mistral, 'mistral')}")
    assert (s.kv_heads, s.head_dim) == (8, 128)
    assert s.kv_bytes_per_token("fp16") == 2 * 32 * 8 * 128 * 2  # GQA: 128 KiB per token
    gpt2 = decoder_shape(f"hf:{_config_dir(tmp_path, {**GPT2, 'n_positions': 2048.0}, 'gpt2')}")
    assert (gpt2.layers, gpt2.heads, gpt2.learned_positions, gpt2.bias) == (2, 4, 2048, True)
    whole = decoder_shape(f"hf:{_config_dir(tmp_path, {**LLAMA, 'hidden_size': 64.0}, 'float')}")
    assert whole.hidden == 64 and isinstance(whole.hidden, int)
    assert DecoderShape.from_zoo("llama-7b").kv_heads == 32  # zoo shapes go through the same checks


def test_check_hf_config_keeps_per_stage_lists_and_normalises_floats() -> None:
    segformer = {"num_attention_heads": [1, 2, 5, 8], "hidden_size": 256, "image_size": [512, 512]}
    assert check_hf_config(segformer) == {"hidden_size": 256}
    assert check_hf_config({"hidden_size": 2048.0, "num_attention_heads": 16}) == {
        "hidden_size": 2048, "num_attention_heads": 16,
    }  # fmt: skip
    with pytest.raises(SpecError, match="num_attention_heads"):
        check_hf_config({"num_attention_heads": [4, 0]})
    with pytest.raises(SpecError, match="vocab_size"):
        check_hf_config({"vocab_size": [1000]})  # not a per-stage key
    assert all(cap >= 10_000 for cap in HF_CONFIG_CAPS.values())


def test_the_memory_path_builds_a_valid_gqa_config(tmp_path: Path) -> None:
    from rightsize.models.byo import resolve_model

    d = _config_dir(tmp_path, {**LLAMA, "num_key_value_heads": 2, "hidden_size": 64.0})
    entry = resolve_model(f"hf:{d}")
    assert entry.family == "decoder" and entry.count_params() > 0


@pytest.mark.slow  # ~1 s on 2 cores: kept out of make test-fast
def test_cli_prints_one_line_and_exits_2(tmp_path: Path) -> None:
    d = _config_dir(tmp_path, {**LLAMA, "num_attention_heads": 0})
    env = {**os.environ, "RIGHTSIZE_STORE": str(tmp_path / "store")}
    proc = subprocess.run(
        [sys.executable, "-m", "rightsize", "finetune", f"hf:{d}", "--tokens", "1e6"],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "config.json: num_attention_heads" in lines[0]
