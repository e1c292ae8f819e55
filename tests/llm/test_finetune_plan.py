"""Fine-tune plans: fit with ZeRO-3 when one GPU cannot hold it, FLOPs per token, hours and cost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rightsize.catalog import load_catalog
from rightsize.catalog.model import Catalog
from rightsize.errors import SpecError
from rightsize.llm.costs import EFFICIENCIES
from rightsize.llm.finetune import finetune_memory
from rightsize.llm.finetune_plan import flops_per_token, plan_finetune
from rightsize.llm.shape import DecoderShape
from rightsize.memory_budget import GIB

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu" / "results"


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


def test_flops_per_token_follow_6n_and_4n_with_the_recompute() -> None:
    s = DecoderShape.from_zoo("llama-7b")
    n = s.params()
    assert flops_per_token(s, "full", False) == 6 * n
    assert flops_per_token(s, "lora", False) == 4 * n
    assert flops_per_token(s, "qlora", True) == 6 * n


def test_hours_and_cost_are_the_flops_over_the_gpus_peak(catalog: Catalog) -> None:
    opts = plan_finetune("llama-7b", "lora", tokens=10e6, batch=2, seq_len=1024, catalog=catalog,
                         providers=["aws"], mfu=0.5, gradient_checkpointing=False)  # fmt: skip
    assert opts
    o = opts[0]
    acc = catalog.accelerators[o.accelerator]
    peak = acc.peak_flops_per_s("bf16") or acc.peak_flops_per_s("fp16")
    n = DecoderShape.from_zoo("llama-7b").params()
    # the math at the MFU, and the optimizer's pass over the adapters (a sliver for LoRA) on top
    math_h = 10e6 * 4 * n / (o.gpus * peak * 0.5) / 3600
    assert o.train_hours * (1 - o.optimizer_share) == pytest.approx(math_h, rel=1e-3)  # the share is rounded
    assert 0 < o.optimizer_share < 0.01
    assert o.spinup_hours == pytest.approx(515 / 3600)  # provision 25 s + CUDA image 480 s + model load 10 s
    assert o.hours == pytest.approx(o.train_hours + o.spinup_hours)
    assert o.usd == pytest.approx(o.hours * o.usd_per_hour)
    assert [x.usd for x in opts] == sorted(x.usd for x in opts)
    assert all(x.gib_per_gpu <= x.usable_gib_per_gpu for x in opts)


def test_a_short_job_is_not_won_by_a_big_node_that_bills_its_spin_up(catalog: Catalog) -> None:
    """5M tokens of QLoRA: minutes on 8 x H200, an hour or more on one L4; the node's spin-up is billed too (10M
    before QLoRA's step was LitGPT's 1.56x LoRA's: the node's 12 minutes of training now outlast its spin-up)."""
    opts = plan_finetune("llama-7b", "qlora", tokens=5e6, batch=4, seq_len=2048, catalog=catalog)
    assert opts[0].gpus == 1
    big = next(o for o in opts if o.gpus == 8)
    assert big.train_hours < big.spinup_hours and big.usd > opts[0].usd


def test_a_full_fine_tune_too_big_for_one_gpu_plans_zero3_over_a_node(catalog: Catalog) -> None:
    # 13B mixed precision: 16 B/param = 208 GB of model states, sharded over 8 (or 4 x 80 GB) GPUs
    opts = plan_finetune("llama-13b", "full", tokens=1e6, batch=1, seq_len=2048, catalog=catalog,
                         precision="amp_bf16")  # fmt: skip
    assert opts and all(o.zero_stage == 3 and o.gpus >= 4 for o in opts)
    # 70B: 1.1 TB of states does not fit one 8-GPU node: ZeRO-3 across nodes, every option
    big = plan_finetune("llama-70b", "full", tokens=1e6, batch=1, seq_len=2048, catalog=catalog,
                        precision="amp_bf16")  # fmt: skip
    assert big and all(o.nodes >= 2 and o.zero_stage == 3 and 0 < o.network_share < 1 for o in big)
    qlora = plan_finetune("llama-70b", "qlora", tokens=1e6, batch=1, seq_len=2048, catalog=catalog)
    assert any(o.gpus == 1 and o.gib_per_gpu > 35 for o in qlora)  # 4-bit weights (~35 GiB) on one 80 GB GPU


def test_bad_input_names_the_field(catalog: Catalog) -> None:
    with pytest.raises(SpecError, match="tokens"):
        plan_finetune("llama-7b", "lora", tokens=0, batch=1, seq_len=8, catalog=catalog)
    with pytest.raises(SpecError, match="mfu"):
        plan_finetune("llama-7b", "lora", tokens=1, batch=1, seq_len=8, catalog=catalog, mfu=1.5)


@pytest.mark.slow  # > 1.2 s: make test runs it, make test-fast skips it
def test_finetune_cli_json(capsys: pytest.CaptureFixture[str]) -> None:
    from rightsize.cli.app import main

    with pytest.raises(SystemExit) as exc:
        main(["finetune", "llama-7b", "--method", "qlora", "--tokens", "5e6", "--provider", "aws", "--json"])
    assert exc.value.code in (0, None)
    out = json.loads(capsys.readouterr().out)
    assert out["memory_one_gpu"]["total_bytes"] < 16 * GIB and out["options"] and out["mfu_assumed"] == 0.35
    with pytest.raises(SystemExit) as exc:
        main(["finetune", "llama-7b", "--method", "lorra", "--tokens", "5e6"])
    assert exc.value.code == 2 and "method" in capsys.readouterr().err
    # without --seq: 2048, capped at what the model takes (GPT-2's 1024 learned positions), not an error
    with pytest.raises(SystemExit) as exc:
        main(["finetune", "gpt2", "--tokens", "1e6", "--json"])
    assert exc.value.code in (0, None) and json.loads(capsys.readouterr().out)["seq_len"] == 1024


def test_a_full_70b_fine_tune_shards_across_nodes_when_no_node_holds_it(catalog: Catalog) -> None:
    opts = plan_finetune("llama-70b", "full", tokens=1e8, batch=4, seq_len=2048, catalog=catalog,
                         providers=["aws"])  # fmt: skip
    by_type = {o.instance: o for o in opts}
    single = by_type["p5e.48xlarge"]  # 8 x H200 (141 GB) hold it with ZeRO-3 in one node
    assert (single.nodes, single.zero_stage, single.network_share) == (1, 3, 0.0)
    h100 = by_type["p5.48xlarge"]  # 8 x H100 (80 GB) do not: the fewest nodes that do, ZeRO-3 over all 16 GPUs
    assert (h100.nodes, h100.gpus, h100.zero_stage) == (2, 8, 3) and h100.gib_per_gpu <= h100.usable_gib_per_gpu
    a100 = by_type["p4d.24xlarge"]  # 40 GB A100s need 4 nodes
    assert a100.nodes == 4 and a100.gib_per_gpu <= a100.usable_gib_per_gpu
    # the network's share: ZeRO-3's 3 x (k-1)/k x 2N bytes per step at 80% of the node's link, against the step
    n, link = DecoderShape.from_zoo("llama-70b").params(), catalog.links[("aws", "p5.48xlarge")].network_gbps
    peak = catalog.accelerators["H100"].peak_flops_per_s("bf16")
    math_s = 4 * 2048 * 16 * 8 * n / (16 * peak * 0.35)
    shard = finetune_memory("llama-70b", "full", batch=4, seq_len=2048, zero_stage=3, gpus=16)
    opt_s = shard.optimizer_step_traffic / (catalog.accelerators["H100"].bandwidth_gbps * 1e9 * 0.75)
    assert EFFICIENCIES["gpu"].bandwidth == 0.75
    net_s = 3 * 0.5 * 2 * n / (link / 8 * 1e9 * 0.8)
    assert h100.network_share == pytest.approx(net_s / (math_s + opt_s + net_s), abs=1e-4)
    assert 0 < h100.network_share < a100.network_share < 0.5  # 4 nodes on a slower link lose more
    assert h100.usd_per_hour == pytest.approx(2 * catalog_price(catalog, "p5.48xlarge"))
    assert h100.usd == pytest.approx(h100.hours * h100.usd_per_hour)
    steps = 1e8 / (4 * 2048 * 16)
    assert h100.train_hours == pytest.approx(steps * (math_s + opt_s) / 3600 / (1 - h100.network_share), rel=1e-3)


def catalog_price(catalog: Catalog, instance_type: str) -> float:
    inst = next(i for i in catalog.instances if i.instance_type == instance_type and i.provider == "aws")
    price = inst.price_usd_per_hour("on_demand")
    assert price is not None
    return price


def test_a_gpu_without_a_16_bit_peak_is_left_out_not_divided_by(catalog: Catalog) -> None:
    # the P4 (8 GiB) holds GPT-2's LoRA at batch 1 x 1 token, but the catalog gives it no fp16/bf16 peak:
    # this divided by zero before 2026-11-27
    p4 = catalog.accelerators["P4"]
    assert not (p4.peak_flops_per_s("bf16") or p4.peak_flops_per_s("fp16"))
    options = plan_finetune("gpt2", "lora", tokens=1e6, batch=1, seq_len=1, catalog=catalog)
    assert options and all(o.accelerator != "P4" for o in options)
    assert all(o.hours > 0 and o.usd > 0 for o in options)


def test_small_full_finetune_steps_carry_the_measured_mfu_caveat() -> None:
    from rightsize.llm.finetune_plan import SMALL_STEP_TOKENS, small_step_note

    note = small_step_note("full", 1, 512)
    assert note is not None and note.startswith("512 tokens a step") and "10-12% MFU" in note
    assert small_step_note("full", 4, 512) is None  # 2048 tokens ran at 36% on the H200
    assert small_step_note("lora", 1, 512) is None  # LoRA ran at 29-37% at every size measured
    # the threshold is the smallest step measured near the assumed MFU (benchmarks/gpu/results/h200-2026-11-27)
    runs = json.loads((RESULTS / "h200-2026-11-27" / "finetune_steps.json").read_text())["runs"]
    small = [r for r in runs if r["method"] == "full" and r["batch"] * r["seq"] < SMALL_STEP_TOKENS]
    assert small and all(r["step_ms"] > 150 for r in small)  # 2-3x the 60-80 ms the 35% MFU plans


def test_the_optimizer_step_is_a_pass_over_the_trained_weights_timed_at_the_gpus_bandwidth(catalog: Catalog) -> None:
    shape = DecoderShape.from_zoo("llama-7b")
    full = finetune_memory(shape, "full", batch=1, seq_len=512)  # pure bf16 AdamW, foreach: 4 + 2 + 14 passes
    assert full.optimizer_step_traffic == full.params_trainable * (4 * 2 + 2 * 2 + 14 * 2)
    amp = finetune_memory(shape, "full", batch=1, seq_len=512, precision="amp_bf16")  # fp32 master, copied back
    assert amp.optimizer_step_traffic == amp.params_trainable * (4 * 4 + 2 * 2 + 14 * 4 + 4 + 2)
    fused = finetune_memory(shape, "full", batch=1, seq_len=512, fused_optimizer=True)
    assert fused.optimizer_step_traffic == fused.params_trainable * (2 * 2 + 1 * 2 + 4 * 2)
    sharded = finetune_memory(shape, "full", batch=1, seq_len=512, zero_stage=3, gpus=8)
    assert sharded.optimizer_step_traffic == full.optimizer_step_traffic // 8
    lora = finetune_memory(shape, "lora", batch=1, seq_len=512)  # PEFT's fp32 adapters: 4-byte everything
    assert lora.optimizer_step_traffic == lora.params_trainable * (4 * 4 + 2 * 4 + 14 * 4)
    # in the plan: a 512-token full step on one H200 is the math at 35% MFU plus ~75 ms of optimizer pass
    opts = plan_finetune("llama-7b", "full", tokens=1e6, batch=1, seq_len=512, catalog=catalog,
                         providers=["aws"], gradient_checkpointing=False)  # fmt: skip
    h200 = next(o for o in opts if o.accelerator == "H200" and o.zero_stage == 0)
    acc = catalog.accelerators["H200"]
    opt_s = full.optimizer_step_traffic / (acc.bandwidth_gbps * 1e9 * EFFICIENCIES["gpu"].bandwidth)
    math_s = 512 * flops_per_token(shape, "full", False) / (acc.peak_flops_per_s("bf16") * 0.35)
    assert 0.05 < opt_s < 0.1 and h200.optimizer_share == pytest.approx(opt_s / (math_s + opt_s), abs=1e-3)
    steps = 1e6 / 512 / h200.gpus
    assert h200.train_hours == pytest.approx(steps * (math_s + opt_s) / 3600, rel=1e-6)


def test_zero3_traffic_is_the_stored_words_and_the_trained_gradients(catalog: Catalog) -> None:
    """The network's time had counted 2-byte words and every weight's gradient whatever the fine-tune: fp32 moves
    4-byte words (12 bytes a parameter a step, not 6: 70B over 8 A100 nodes 6% -> 12% of the time), and an
    adapter's frozen base sends no gradients (LoRA: its 16-bit base gathered twice, about 4 bytes a parameter)."""
    n = DecoderShape.from_zoo("llama-70b").params()
    kw = {"batch": 1, "seq_len": 512, "zero_stage": 3, "gpus": 16}
    assert finetune_memory("llama-70b", "full", **kw).zero3_step_bytes == pytest.approx(6 * n, rel=1e-3)
    assert finetune_memory("llama-70b", "full", precision="fp32", **kw).zero3_step_bytes == pytest.approx(
        12 * n, rel=1e-3
    )
    assert finetune_memory("llama-70b", "lora", **kw).zero3_step_bytes == pytest.approx(4 * n, rel=0.01)
    fp32 = next(o for o in plan_finetune("llama-70b", "full", tokens=1e6, batch=4, seq_len=2048, catalog=catalog,
                                         precision="fp32", providers=["azure"])
                if o.instance == "Standard_NC96ads_A100_v4")  # fmt: skip
    # 8 nodes: 7/8 x 12 B x 69 B parameters = 724 GB a step at 80% of 80 Gb/s, 90 s against 662 s of math
    assert fp32.nodes == 8 and fp32.network_share == pytest.approx(0.12, abs=0.01)
