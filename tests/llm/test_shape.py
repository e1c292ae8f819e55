"""Decoder architecture arithmetic against published and measured numbers."""

from __future__ import annotations

import pytest

from rightsize.errors import NotFoundError, SpecError
from rightsize.llm.shape import INT4_GROUP_SIZE, DecoderShape

# Parameter counts of the zoo builds on the meta device (ZOO[name].count_params(tiny), transformers 5.x).
ZOO_PARAMS = {
    ("gpt2", False): 124_439_808,
    ("gpt2", True): 61_568,
    ("llama-1b", False): 1_235_814_400,
    ("llama-1b", True): 50_592,
    ("llama-7b", False): 6_738_415_616,
    ("llama-7b", True): 82_592,
    ("llama-13b", False): 13_015_864_320,
}
KIB = 1024


@pytest.mark.parametrize(("name", "tiny"), list(ZOO_PARAMS))
def test_params_match_the_zoo_builds(name: str, tiny: bool) -> None:
    assert DecoderShape.from_zoo(name, tiny).params() == ZOO_PARAMS[(name, tiny)]


def test_published_numbers() -> None:
    llama7 = DecoderShape.from_zoo("llama-7b")
    assert llama7.params() == pytest.approx(6.74e9, rel=1e-3)  # Llama 2 7B model card: "6.74B"
    assert llama7.kv_bytes_per_token("fp16") == 512 * KIB  # 32 layers x 2 x 4096 x 2 B
    llama1 = DecoderShape.from_zoo("llama-1b")
    assert (llama1.layers, llama1.kv_heads, llama1.head_dim) == (16, 8, 64)
    assert llama1.kv_bytes_per_token("fp16") == 32 * KIB  # GQA: 8 of 32 heads keep K and V
    assert llama1.params() == pytest.approx(1.24e9, rel=1e-2)  # Llama 3.2 1B: "1.23B"
    gpt2 = DecoderShape.from_zoo("gpt2")
    assert gpt2.params() == pytest.approx(124e6, rel=5e-3)
    assert gpt2.kv_bytes_per_token("fp32") == 2 * 12 * 768 * 4


def test_hf_configs_give_the_same_shapes() -> None:
    transformers = pytest.importorskip("transformers")
    from rightsize.models.zoo import llama_config

    for name in ("llama-1b", "llama-7b", "llama-13b"):
        for tiny in (False, True):
            assert DecoderShape.from_hf_config(llama_config(name, tiny)) == DecoderShape.from_zoo(name, tiny)
    assert DecoderShape.from_hf_config(transformers.GPT2Config()) == DecoderShape.from_zoo("gpt2")
    tiny_gpt2 = transformers.GPT2Config(vocab_size=1000, n_positions=128, n_embd=32, n_layer=2, n_head=2)
    assert DecoderShape.from_hf_config(tiny_gpt2) == DecoderShape.from_zoo("gpt2", tiny=True)


def test_weight_bytes_per_precision() -> None:
    s = DecoderShape.from_zoo("llama-7b")
    p, q = s.params(), s.block_matmul_params()
    assert s.weight_bytes("fp32") == 4 * p
    assert s.weight_bytes("bf16") == s.weight_bytes("fp16") == 2 * p
    rest = 2 * (p - q)  # embeddings, LM head, norms stay fp16
    out_rows = 32 * (3 * 4096 + 4096 + 2 * 11008 + 4096)
    assert s.weight_bytes("int8") == q + 2 * out_rows + rest
    assert s.weight_bytes("int4") == q // 2 + -(-q // INT4_GROUP_SIZE) * 4 + rest
    assert s.weight_bytes("int4") / 1e9 == pytest.approx(3.97, abs=0.01)  # ~4 GB, as GPTQ 7B checkpoints
    with pytest.raises(SpecError, match="fp16"):
        s.weight_bytes("fp61")


def test_flops_and_bytes_conventions() -> None:
    s = DecoderShape.from_zoo("llama-7b")
    n_mm, h, v, d = s.block_matmul_params(), 4096, 32000, 4096
    t = 1000
    assert s.prefill_flops(t) == 2 * n_mm * t + 2 * h * v + 2 * 32 * t * t * d  # causal half of 4·L·T²·d
    assert s.decode_flops(8, 8 * 500) == 2 * (n_mm + h * v) * 8 + 4 * 32 * d * 4000
    kv = s.kv_bytes_per_token("fp16")
    weights_read = s.weight_bytes("fp16") - 2 * v * h  # the input table is gathered, the LM head read
    assert s.decode_bytes(8, 4000) == weights_read + kv * (4000 + 8)
    assert s.prefill_bytes(t) == weights_read + kv * t


def test_max_concurrent_tokens() -> None:
    s = DecoderShape.from_zoo("llama-7b")
    gib80 = 80 * 2**30
    expect = int((0.9 * gib80 - s.weight_bytes("fp16")) // (512 * KIB))
    assert s.max_concurrent_tokens(gib80, "fp16", "fp16", 0.1) == expect
    assert 120_000 < expect < 123_000
    assert abs(s.max_concurrent_tokens(gib80, "fp16", "fp8") - 2 * expect) <= 1  # fp8 KV: half the bytes
    assert s.max_concurrent_tokens(8 * 2**30, "fp16") == 0  # 13.5 GB of weights do not fit in 8 GiB


def test_errors_say_what_to_change() -> None:
    with pytest.raises(NotFoundError, match="llama-7b"):
        DecoderShape.from_zoo("llama-8b")
    with pytest.raises(SpecError, match="To fix"):
        DecoderShape.from_hf_config({"d_model": 512})
    with pytest.raises(SpecError, match="reserve_fraction"):
        DecoderShape.from_zoo("gpt2").max_concurrent_tokens(1e9, reserve_fraction=1.0)


def test_a_request_past_a_llamas_trained_context_is_refused() -> None:
    # Llama 2 was trained for 4k positions; a 100k-token prompt planned 58 x p5e.48xlarge before 2026-11-27
    assert DecoderShape.from_zoo("llama-7b").max_context == 4096
    assert DecoderShape.from_zoo("llama-1b").max_context == 131_072  # Llama 3.2
    assert DecoderShape.from_hf_config({"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
                                        "intermediate_size": 128, "vocab_size": 100}).max_context == 0  # fmt: skip
    from rightsize.catalog import load_catalog
    from rightsize.errors import SpecError
    from rightsize.llm.plan import plan_generative
    from rightsize.spec.targets import GenerativeTarget

    target = GenerativeTarget.model_validate({"rate_per_s": 1, "prompt_tokens": 100_000, "output_tokens": 100,
                                              "ttft": {"bound_ms": 5000}, "tpot": {"bound_ms": 100}})  # fmt: skip
    with pytest.raises(SpecError, match="trained for 4,096"):
        plan_generative(DecoderShape.from_zoo("llama-7b"), target, load_catalog())


def test_the_context_check_takes_the_lengths_longest_not_a_samples() -> None:
    """uniform [200, 800] + [64, 226] can reach 1026 tokens, past GPT-2's 1024: it planned on most seeds, the
    check reading the largest of 600 random draws."""
    from rightsize.catalog import load_catalog
    from rightsize.errors import SpecError
    from rightsize.llm.plan import plan_generative
    from rightsize.spec.targets import GenerativeTarget

    target = GenerativeTarget.model_validate({"rate_per_s": 1, "prompt_tokens": {"uniform": [200, 800]},
                                              "output_tokens": {"uniform": [64, 226]},
                                              "ttft": {"bound_ms": 5000}, "tpot": {"bound_ms": 100}})  # fmt: skip
    for seed in range(3):
        with pytest.raises(SpecError, match=r"^targets\.generative\.prompt_tokens \+ output_tokens: .* up to 1,026 "):
            plan_generative(DecoderShape.from_zoo("gpt2"), target, load_catalog(), seed=seed)


def test_a_gpt2_config_without_n_positions_has_gpt2configs_1024() -> None:
    """It read as no learned positions, so `finetune` planned 2048 tokens on a model with 1024."""
    cfg = {"model_type": "gpt2", "n_layer": 2, "n_embd": 64, "n_head": 2, "vocab_size": 1000}
    assert DecoderShape.from_hf_config(cfg).learned_positions == 1024
