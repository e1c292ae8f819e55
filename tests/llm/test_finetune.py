"""finetune.py: hand-checked model states, LoRA counts, NF4 bytes, ZeRO sharding; the reference CSV."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from importlib import resources
from pathlib import Path
from types import SimpleNamespace

import pytest

from rightsize.errors import NotFoundError, SpecError
from rightsize.llm.finetune import FinetuneMemory, finetune_memory, lora_trainable_params

# Llama-2-7B: h 4096, f 11008, 32 layers, vocab 32000 (Touvron et al. 2023)
H, F, L, V = 4096, 11008, 32, 32000
LINEAR_7B = L * (4 * H * H + 3 * H * F)  # 6_476_005_376 block linear weights
OTHER_7B = 2 * V * H + (2 * L + 1) * H  # embeddings + LM head + RMSNorms = 262_410_240
P_7B = LINEAR_7B + OTHER_7B  # 6_738_415_616
LLAMA_7B_HF = {
    "num_hidden_layers": L, "hidden_size": H, "num_attention_heads": 32, "num_key_value_heads": 32,
    "intermediate_size": F, "vocab_size": V,
}  # fmt: skip


def test_parameter_count_matches_llama2_7b() -> None:
    assert P_7B == 6_738_415_616
    m = finetune_memory("llama-7b", "full", batch=1, seq_len=512, precision="bf16")
    assert m.params_total == m.params_trainable == P_7B


def test_full_finetune_adamw_mixed_precision_is_16_bytes_per_param_plus_activations() -> None:
    # ZeRO §3.1: 2 (fp16 weights) + 2 (fp16 grads) + 12 (fp32 master, m, v) bytes per parameter
    m = finetune_memory("llama-7b", "full", batch=1, seq_len=2048, precision="amp_bf16", optimizer="adamw")
    assert m.weights + m.gradients + m.optimizer_states == 16 * P_7B
    assert m.optimizer_states == 12 * P_7B
    assert m.activations > 0
    assert m.allocated_bytes > 80e9  # does not fit one 80 GB GPU
    # fused AdamW has no sqrt(exp_avg_sq) copy; foreach keeps one fp32 copy of the states' size
    fused = finetune_memory("llama-7b", "full", batch=1, seq_len=2048, precision="amp_bf16", fused_optimizer=True)
    assert m.optimizer_step_transient == 4 * P_7B and fused.optimizer_step_transient == 0


def test_lora_rank16_qv_trainable_params_exact() -> None:
    expected = 2 * L * 2 * 16 * H  # q and v, A (16x4096) + B (4096x16), 32 layers
    assert expected == 8_388_608
    assert lora_trainable_params("llama-7b", 16, ("q", "v")) == expected
    assert lora_trainable_params("llama-7b", 16, ("q_proj", "v_proj")) == expected  # PEFT names
    m = finetune_memory("llama-7b", "lora", batch=1, seq_len=512, lora_rank=16, lora_targets=("q", "v"),
                        framework="torchtune")  # fmt: skip
    assert m.params_trainable == expected
    # pure bf16, adapters in the model dtype: weight 2 + gradient 2 + AdamW m, v 2 + 2 bytes per trainable parameter
    assert m.adapter_weights == 2 * expected and m.gradients == 2 * expected and m.optimizer_states == 4 * expected
    # HF PEFT upcasts the adapters to fp32: 4 + 4 + 4 + 4, no master copy; the frozen base stays bf16
    peft = finetune_memory("llama-7b", "lora", batch=1, seq_len=512, lora_rank=16, lora_targets=("q", "v"))
    assert peft.framework == "hf" and peft.weights == m.weights
    assert peft.adapter_weights == peft.gradients == 4 * expected and peft.optimizer_states == 8 * expected
    assert m.weights == 2 * P_7B  # the frozen base in bf16


def test_lora_all_linear_counts_mlp_and_published_litgpt_count() -> None:
    per_layer = 16 * (2 * H + 2 * H + 2 * H + 2 * H + 3 * (H + F))
    assert lora_trainable_params("llama-7b", 16, "all-linear") == L * per_layer
    # LitGPT resource table: Llama 2 7B, r=8 on query+value, '4,194,304' trainable; 13B '6,553,600'
    assert lora_trainable_params("llama-7b", 8, ("q", "v")) == 4_194_304
    assert lora_trainable_params("llama-13b", 8, ("q", "v")) == 6_553_600


def test_qlora_7b_weights_nf4_with_double_quant() -> None:
    m = finetune_memory("llama-7b", "qlora", batch=1, seq_len=512, lora_rank=16)
    assert m.weights == LINEAR_7B // 2 + 2 * OTHER_7B  # 4-bit linears, 16-bit embeddings / head / norms
    # QLoRA §3: double quantisation leaves 8/64 + 32/(64*256) = 0.127 bit/param of constants
    assert m.quant_constants == int(LINEAR_7B * (8 / 64 + 32 / (64 * 256)) / 8)
    assert 3.5e9 <= m.weights + m.quant_constants <= 3.9e9
    single = finetune_memory("llama-7b", "qlora", batch=1, seq_len=512, double_quant=False)
    assert single.quant_constants == int(LINEAR_7B * 0.5 / 8)  # one fp32 absmax per 64 weights


def test_zero3_over_8_gpus_divides_model_states_by_8() -> None:
    def full(zero_stage: int = 0, gpus: int = 1) -> FinetuneMemory:
        return finetune_memory("llama-7b", "full", batch=1, seq_len=1024, precision="amp_bf16",
                               zero_stage=zero_stage, gpus=gpus)  # fmt: skip

    one, z3 = full(), full(zero_stage=3, gpus=8)
    assert z3.weights == one.weights // 8
    assert z3.gradients == one.gradients // 8
    assert z3.optimizer_states == one.optimizer_states // 8
    assert z3.activations == one.activations  # data parallel: each GPU runs its own micro-batch
    assert z3.zero3_gather > 0 and one.zero3_gather == 0
    z1 = full(zero_stage=1, gpus=8)
    assert (z1.optimizer_states, z1.gradients, z1.weights) == (one.optimizer_states // 8, one.gradients, one.weights)
    z2 = full(zero_stage=2, gpus=8)
    assert (z2.gradients, z2.weights) == (one.gradients // 8, one.weights)


def test_activation_bytes_per_token_hand_checked() -> None:
    # frozen Llama layer with LoRA on q, v, no dropout, bf16 (module docstring):
    # 2 RMSNorms 2*4h, flash q k v out 2(2h + 2h), SwiGLU 3*2f, q/k/v input 2h, adapters 2 * 2r
    r, b, s = 16, 2, 1024
    per_layer = 8 * H + 2 * (4 * H) + 6 * F + 2 * H + 2 * 2 * r
    assert per_layer == 14 * H + 4 * H + 6 * F + 4 * r == 139_840
    m = finetune_memory("llama-7b", "lora", batch=b, seq_len=s, lora_rank=r, lora_targets=("q", "v"),
                        gradient_checkpointing=False, framework="litgpt")  # fmt: skip
    assert m.activations_full == b * s * (L * per_layer + per_layer + 2 * H)
    # per-layer checkpointing keeps each layer's bf16 input (Korthikanti §4.1: 2sbh per layer) + one layer
    assert m.activations_checkpointed == b * s * (L * 2 * H + per_layer + 2 * H)
    assert m.activations == m.activations_full > m.activations_checkpointed
    assert m.logits == b * s * V * 16
    assert m.breakdown()["activations"] == m.activations and m.breakdown()["logits"] == m.logits  # held together


def test_hf_peft_activations_and_logits_hand_checked() -> None:
    # HF + PEFT: each adapter saves its input cast to fp32 (4h) and A's fp32 output (4r); the frozen bf16 q/k/v
    # input is then kept by nothing. Checked per saved tensor with torch's saved-tensors hook on a small Llama.
    r, b, s = 16, 2, 1024
    per_layer = 8 * H + 2 * (4 * H) + 6 * F + 4 * (4 * H + 4 * r)  # norms, flash, SwiGLU, 4 adapters (q,k,v,o)
    m = finetune_memory("llama-7b", "lora", batch=b, seq_len=s, lora_rank=r, gradient_checkpointing=False)
    assert m.framework == "hf" and m.layer_in_flight == b * s * per_layer
    assert m.activations_full == b * s * (L * per_layer + per_layer + 2 * H)
    # the loss upcasts the 16-bit logits: saved fp32 log-softmax, its gradient, the logits' gradient (12 bytes)
    assert m.logits == b * s * V * 12
    # ... all freed before the last layer's backward: the larger of logits and one layer counts, not both
    assert m.logits > m.layer_in_flight
    assert m.breakdown()["activations"] == m.activations_full - m.layer_in_flight
    assert m.breakdown()["logits"] == m.logits
    small_vocab = finetune_memory({**LLAMA_7B_HF, "vocab_size": 1000}, "lora", batch=b, seq_len=s,
                                  gradient_checkpointing=False)  # fmt: skip
    assert small_vocab.breakdown()["logits"] == 0 and small_vocab.breakdown()["activations"] == small_vocab.activations
    with pytest.raises(SpecError, match="choose one of hf, torchtune, litgpt"):
        finetune_memory("llama-7b", "lora", batch=1, seq_len=8, framework="peft")


def test_shape_from_hf_config_and_dict_match_zoo() -> None:
    zoo = finetune_memory("llama-7b", "lora", batch=2, seq_len=512)
    assert finetune_memory(SimpleNamespace(**LLAMA_7B_HF), "lora", batch=2, seq_len=512) == zoo
    short = {"layers": L, "hidden": H, "heads": 32, "kv_heads": 32, "intermediate": F, "vocab": V}
    assert finetune_memory(short, "lora", batch=2, seq_len=512) == zoo


def test_breakdown_sums_to_total_and_orders_quantities() -> None:
    m = finetune_memory("llama-7b", "qlora", batch=4, seq_len=2048, lora_targets="all-linear")
    b = m.breakdown()
    assert sum(b.values()) == m.total_bytes
    assert m.allocated_bytes < m.reserved_bytes < m.total_bytes
    assert m.total_bytes - m.reserved_bytes == b["cuda_context"]
    assert m.peak_phase == "forward_backward"


def test_errors_say_what_to_change() -> None:
    with pytest.raises(SpecError, match="choose one of full, lora, qlora"):
        finetune_memory("llama-7b", "lorra", batch=1, seq_len=8)
    with pytest.raises(SpecError, match="zero_stage"):
        finetune_memory("llama-7b", "full", batch=1, seq_len=8, zero_stage=4)
    with pytest.raises(SpecError, match="Did you mean 'gate'"):
        finetune_memory("llama-7b", "lora", batch=1, seq_len=8, lora_targets=("gatee",))
    with pytest.raises(SpecError, match="batch"):
        finetune_memory("llama-7b", "lora", batch=0, seq_len=8)
    with pytest.raises(NotFoundError, match="llama-7b"):
        finetune_memory("llama-8b", "lora", batch=1, seq_len=8)


def test_import_does_not_load_torch() -> None:
    code = "import sys, rightsize.llm.finetune; sys.exit('torch' in sys.modules or 'transformers' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def _reference_rows() -> list[dict[str, str]]:
    text = resources.files("rightsize.llm").joinpath("data/llm_references.csv").read_text()
    return list(csv.DictReader(text.splitlines()))


def test_reference_csv_every_row_has_source_url_and_date() -> None:
    rows = _reference_rows()
    assert len({r["id"] for r in rows}) == len(rows)
    for r in rows:
        assert r["kind"] in ("decode_tps", "finetune_memory_gb"), r["id"]
        assert r["source_url"].startswith("https://"), r["id"]
        assert re.fullmatch(r"\d{4}-\d{2}(-\d{2})?", r["source_date"]), r["id"]
        assert float(r["value"]) > 0 and r["unit"] and r["metric"] and r["note"], r["id"]
    decode = [r for r in rows if r["kind"] == "decode_tps"]
    small = [r for r in decode if re.search(r"-(7|8)b$", r["model"]) and r["device"].startswith(("A100", "H100"))]
    assert len(small) >= 6
    assert any(r["concurrency"] == "1" for r in small) and any(r["concurrency"] not in ("", "1") for r in small)
    memory = [r for r in rows if r["kind"] == "finetune_memory_gb"]
    assert len(memory) >= 6 and {r["method"] for r in memory} >= {"lora", "qlora", "full"}


def test_reference_memory_rows_run_through_the_estimator() -> None:
    shapes = {"llama-2-7b": "llama-7b", "llama-2-13b": "llama-13b"}
    for r in (r for r in _reference_rows() if r["kind"] == "finetune_memory_gb"):
        m = finetune_memory(
            shapes[r["model"]], r["method"],
            batch=int(r["batch"]), seq_len=int(r["seq_len"]), precision=r["precision"], optimizer=r["optimizer"],
            lora_rank=int(r["lora_rank"] or 8), lora_targets=tuple(t for t in r["lora_targets"].split(";") if t),
            gpus=int(r["gpus"]), zero_stage=int(r["zero_stage"] or 0),
        )  # fmt: skip
        assert 0.3 < m.allocated_bytes / 1e9 / float(r["value"]) < 3.0, r["id"]  # same order of magnitude


def test_gpt2_and_an_hf_config_resolve_like_the_serving_plans(tmp_path: Path) -> None:
    """finetune takes every decoder reference the generative planner takes (llm.shape.decoder_shape)."""
    full = finetune_memory("gpt2", "full", batch=1, seq_len=1024)
    assert full.params_trainable == 124_439_808  # GPT-2 small, HF GPT2LMHeadModel: biases and wpe included
    (tmp_path / "config.json").write_text(json.dumps({
        "model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000, "hidden_act": "silu",
    }))  # fmt: skip
    lora = finetune_memory(f"hf:{tmp_path}", "lora", batch=1, seq_len=512, lora_rank=16, lora_targets="all-linear")
    # PEFT all-linear r=16 on Mistral-7B: 32 x 16 x (q 4096+4096, k 4096+1024, v 4096+1024, o 4096+4096,
    # gate 4096+14336, up 4096+14336, down 14336+4096) = 41,943,040
    assert lora.params_trainable == 41_943_040
    with pytest.raises(SpecError, match="resnet50 is a cnn, not a decoder"):
        finetune_memory("resnet50", "lora", batch=1, seq_len=128)
    with pytest.raises(NotFoundError, match="Did you mean 'llama-7b'"):
        finetune_memory("llama-8b", "lora", batch=1, seq_len=128)


def test_plans_match_real_h200_finetune_runs() -> None:
    # benchmarks/finetune_vs_device.py over the committed H200 run (13 real Llama-2-7B steps, HF + PEFT)
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import finetune_vs_device as bench

    run = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu" / "results" / "h200-2026-11-27"
    rows = bench._rows(run)
    assert len(rows) == 13
    assert max(abs(r["device_err"]) for r in rows) <= 0.10  # what rightsize finetune prints, vs the device in use
    assert max(abs(r["allocated_err"]) for r in rows) <= 0.02  # live tensors
    lora = [r for r in rows if r["method"] == "lora"]
    # planning PEFT's run as torchtune code misses by > 15% somewhere: the framework matters
    assert max(abs(r["as_torchtune_err"]) for r in lora) > 0.15
    assert all(0.25 <= r["mfu"] <= 0.45 for r in lora)  # the 35% MFU assumption holds for LoRA here


def test_an_fp32_model_has_no_adapter_copies_to_make() -> None:
    # PEFT's cast returns an fp32 input itself: under fp32 the hf and torchtune layers save the same tensors
    kw = {"batch": 1, "seq_len": 1, "precision": "fp32", "gradient_checkpointing": False}
    hf = finetune_memory("llama-7b", "lora", framework="hf", **kw)
    tt = finetune_memory("llama-7b", "lora", framework="torchtune", **kw)
    assert hf.layer_in_flight == tt.layer_in_flight and hf.adapter_weights == tt.adapter_weights
    bf16 = finetune_memory("llama-7b", "lora", framework="hf", batch=1, seq_len=1, gradient_checkpointing=False)
    assert bf16.layer_in_flight > finetune_memory("llama-7b", "lora", framework="torchtune", batch=1, seq_len=1,
                                                  gradient_checkpointing=False).layer_in_flight  # fmt: skip


def test_a_gate_target_on_an_ungated_model_says_the_model_has_none() -> None:
    """`--targets gate` on gpt2 read "unknown target 'gate'", though --help lists gate: gpt2's MLP has no gate."""
    with pytest.raises(SpecError, match=r"^lora_targets: 'gate': this model has no such layer \(its MLP is not "
                       r"gated\); use 'all-linear' or names among q, k, v, o, up, down, lm_head\."):  # fmt: skip
        lora_trainable_params("gpt2", 8, ("q", "gate"))
    with pytest.raises(SpecError, match=r"^lora_targets: unknown target 'zz'"):
        lora_trainable_params("gpt2", 8, ("zz",))
    assert lora_trainable_params("llama-7b", 8, ("gate",)) > 0


def test_all_linear_among_other_names_is_refused_with_the_list_it_means() -> None:
    """`--targets all-linear,lm_head` read "unknown target 'all-linear'; use 'all-linear' or ...": all-linear is the
    whole value (every block linear, never the LM head), so the fix is that list spelled out."""
    with pytest.raises(SpecError, match=r"^lora_targets: 'all-linear' takes no other names: it already adapts every "
                       r"linear of the blocks \(q, k, v, o, gate, up, down\), and never lm_head\. To fix: pass "
                       r"all-linear alone, or list the names: q,k,v,o,gate,up,down,lm_head$"):  # fmt: skip
        lora_trainable_params("llama-7b", 8, ("all-linear", "lm_head"))
    with pytest.raises(SpecError, match=r"\(q, k, v, o, up, down\).*names: q,k,v,o,up,down$"):  # gpt2: no gate
        lora_trainable_params("gpt2", 8, ("q_proj", "all-linear"))
    with pytest.raises(SpecError, match=r"unknown target 'zz'"):  # a bad name is named first
        lora_trainable_params("gpt2", 8, ("all-linear", "zz"))
    every = lora_trainable_params("llama-7b", 8, "all-linear")
    assert lora_trainable_params("llama-7b", 8, ("all-linear",)) == every  # alone in a list, as a string
    assert lora_trainable_params("llama-7b", 8, ["q", "k", "v", "o", "gate", "up", "down"]) == every
