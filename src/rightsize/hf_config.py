"""The dimensions of a transformers config.json, checked at the one boundary both of its readers cross: the decoder
shape (``llm.shape``, for serving and fine-tune plans) and a user's model built by transformers (``models.byo``, for
``memory`` and ``bench``). Outside both packages, so neither imports the other for it.

    hf_dim(value, "hidden_size")            # an int in [1, cap], else SpecError naming the key
    check_hf_config(data, "dir/config.json")  # every common dimension present, and heads that fit the width
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rightsize.errors import SpecError
from rightsize.inputfile import short

__all__ = ["HF_CONFIG_CAPS", "check_heads", "check_hf_config", "hf_dim", "splits_heads"]

# The largest value each dimension of a transformers config may take (each must also be a whole number >= 1). Far
# past any published model (Llama-3.1-405B: 126 layers, hidden 16384, 128 heads, FFN 53248, vocab 128256; Llama-4
# Scout: 10M positions), small enough that every product here stays a finite float.
HF_CONFIG_CAPS: dict[str, int] = {
    "n_layer": 10_000, "num_hidden_layers": 10_000,
    "n_embd": 1_000_000, "hidden_size": 1_000_000,
    "n_head": 10_000, "num_attention_heads": 10_000, "num_key_value_heads": 10_000,
    "head_dim": 100_000,
    "n_inner": 10_000_000, "intermediate_size": 10_000_000,
    "vocab_size": 10_000_000,
    "n_positions": 100_000_000, "max_position_embeddings": 100_000_000,
    "image_size": 100_000,
}  # fmt: skip
# Keys some transformers configs hold per stage or per layer (SegFormer's heads, Gemma-3n's FFN widths, LXMERT's
# layers, image_size as [height, width]): a list or mapping of numbers there is checked number by number.
_PER_STAGE_KEYS = ("num_hidden_layers", "num_attention_heads", "intermediate_size", "image_size")


def hf_dim(value: Any, key: str, source: str = "config") -> int:
    """``value`` of config ``key`` as an int in [1, HF_CONFIG_CAPS[key]] (a float such as 2048.0 counts; a bool,
    string, list, NaN or infinity does not); SpecError naming ``source: key`` otherwise."""
    cap = HF_CONFIG_CAPS[key]
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float) and value.is_integer():  # False for NaN and the infinities
        number = int(value)
    if number is None or not 1 <= number <= cap:
        raise SpecError(f"{source}: {key}", f"must be a whole number from 1 to {cap:,}, got {short(value)}; "
                        f"set the model's real {key}")  # fmt: skip
    return number


def check_heads(source: str, keys: tuple[str, str, str], hidden: int, heads: int, kv_heads: int) -> None:
    """Heads at most the width, key/value heads at most the heads and dividing them (GQA groups)."""
    hidden_key, heads_key, kv_key = keys
    if heads > hidden:
        raise SpecError(f"{source}: {heads_key}", f"is {heads}, more than {hidden_key} ({hidden}); each head needs "
                        f"at least one of the {hidden_key} channels: use fewer heads")  # fmt: skip
    if kv_heads > heads or heads % kv_heads:
        raise SpecError(f"{source}: {kv_key}", f"is {kv_heads}; grouped-query attention needs a divisor of "
                        f"{heads_key} ({heads}): use e.g. {heads} (MHA) or 1 (MQA)")  # fmt: skip


def splits_heads(heads: int, kv_heads: int, tp: int) -> bool:
    """Whether tensor parallel over ``tp`` GPUs can split ``heads`` query and ``kv_heads`` key/value heads as vLLM
    does: the query heads evenly, and the key/value heads evenly or, when ``tp`` is a multiple of them, each
    replicated on tp / kv_heads GPUs (vLLM ``ModelConfig.verify_with_parallel_config`` and ``QKVParallelLinear``,
    https://github.com/vllm-project/vllm/blob/v0.6.0/vllm/model_executor/layers/linear.py, read 2026-11-27)."""
    if tp < 1 or heads % tp:
        return False
    return kv_heads % tp == 0 or tp % kv_heads == 0


def check_hf_config(data: Mapping[str, Any], source: str = "config.json") -> dict[str, int]:
    """Check the common dimension keys of a config.json mapping that are present (see HF_CONFIG_CAPS): each must
    be a whole number in range (per-stage keys, ``_PER_STAGE_KEYS``, may hold a list or mapping of them) and the
    heads must fit the width (``check_heads``). SpecError naming ``source: key`` otherwise. Returns the single
    numbers as ints (2048.0 -> 2048: transformers >= 5 refuses a float where it types an int)."""
    ints: dict[str, int] = {}
    for key in HF_CONFIG_CAPS:
        value = data.get(key)
        if value is None:  # absent or null: the config class's default
            continue
        items = list(value.values()) if isinstance(value, Mapping) else value if isinstance(value, list) else None
        if items is None or key not in _PER_STAGE_KEYS:
            ints[key] = hf_dim(value, key, source)
            continue
        for item in items:
            if not isinstance(item, (list, Mapping)):  # deeper nesting: left to the config class
                hf_dim(item, key, source)
    for keys in (("n_embd", "n_head", "n_head"), ("hidden_size", "num_attention_heads", "num_key_value_heads")):
        hidden, heads = ints.get(keys[0]), ints.get(keys[1])
        if hidden is not None and heads is not None:
            check_heads(source, keys, hidden, heads, ints.get(keys[2], heads))
    return ints
