"""Real fine-tuning steps of a decoder on this machine's GPU: peak memory and step time, for
``rightsize finetune``'s memory and time model to be checked against (``benchmarks/finetune_vs_device.py``).

    python benchmarks/gpu/finetune_steps.py --out finetune.json                       # CUDA: Llama 2 7B
    python benchmarks/gpu/finetune_steps.py --device cpu --tiny --out finetune.json   # a smoke run

Each config is ``method:batch:seq:checkpointing`` (lora: rank 16 on q,k,v,o through PEFT; full: every
parameter), pure bf16 (weights, gradients and AdamW states in bf16, no fp32 master copy: what ``rightsize
finetune --precision bf16`` plans), HF ``LlamaForCausalLM`` with random weights built on the device, labels
= inputs. Per config: ``torch.cuda`` peak allocated and reserved bytes over 2 warm-up and ``--steps`` timed
steps (forward, backward, optimizer step, zero_grad), the device memory in use at the end (context
included), and the median step time.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from typing import Any

import torch
from llm_steps import _sync, build  # benchmarks/gpu/llm_steps.py: the same random-weight decoder on the device

DEFAULT_CONFIGS = "lora:4:512:1,lora:4:512:0,lora:8:1024:1,lora:1:2048:0,full:1:512:1,full:4:512:1"


def run_config(method: str, batch: int, seq: int, ckpt: bool, tiny: bool, device: str, steps: int) -> dict[str, Any]:
    model: Any = build("llama-7b", "tiny" if tiny else "full", device, torch.bfloat16)  # built in bf16, never fp32
    model.config._attn_implementation = "sdpa"  # read at each forward
    if method == "lora":
        from peft import LoraConfig, get_peft_model

        lora = LoraConfig(r=16, lora_alpha=32, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])
        model = get_peft_model(model, lora)
        if ckpt:
            model.enable_input_require_grads()  # checkpointed blocks need a grad-requiring input
    if ckpt:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.config.use_cache = False
    model.train()
    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trainable, lr=1e-5)
    vocab = model.config.vocab_size
    gen = torch.Generator(device="cpu").manual_seed(1)
    x = torch.randint(0, vocab, (batch, seq), generator=gen).to(device)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times = []
    for i in range(2 + steps):
        _sync(device)
        t0 = time.perf_counter()
        loss = model(input_ids=x, labels=x).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        _sync(device)
        if i >= 2:
            times.append(time.perf_counter() - t0)
    out: dict[str, Any] = {"method": method, "batch": batch, "seq": seq, "checkpointing": ckpt,
                           "trainable_params": sum(p.numel() for p in trainable),
                           "params": sum(p.numel() for p in model.parameters()),
                           "step_ms": round(statistics.median(times) * 1e3, 2),
                           "step_ms_all": [round(t * 1e3, 2) for t in times], "loss": float(loss)}  # fmt: skip
    if device == "cuda":
        free, total = torch.cuda.mem_get_info()
        out |= {"peak_allocated_bytes": torch.cuda.max_memory_allocated(),
                "peak_reserved_bytes": torch.cuda.max_memory_reserved(), "device_used_bytes": total - free}  # fmt: skip
    del model, opt, trainable, loss
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="the zoo's tiny Llama shape (a smoke run)")
    ap.add_argument("--configs", default=DEFAULT_CONFIGS, help="method:batch:seq:checkpointing, comma-separated")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    env: dict[str, Any] = {"torch": torch.__version__}
    if a.device == "cuda":
        env["gpu"] = torch.cuda.get_device_name(0)
    import peft
    import transformers

    env |= {"transformers": transformers.__version__, "peft": peft.__version__}
    result: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"), "model": "llama-7b", "tiny": a.tiny,
                              "precision": "bf16 (pure)", "env": env, "runs": []}  # fmt: skip
    for spec in a.configs.split(","):
        method, batch, seq, ckpt = spec.split(":")
        try:
            row = run_config(method, int(batch), int(seq), ckpt == "1", a.tiny, a.device, a.steps)
        except torch.OutOfMemoryError as e:
            row = {"method": method, "batch": int(batch), "seq": int(seq), "checkpointing": ckpt == "1",
                   "error": str(e).splitlines()[0][:200]}  # fmt: skip
            gc.collect()
            torch.cuda.empty_cache()
        print(row, flush=True)
        result["runs"].append(row)
        with open(a.out, "w", encoding="utf-8") as f:  # after each config: a timeout keeps what was measured
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
