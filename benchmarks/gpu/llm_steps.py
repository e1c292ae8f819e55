"""Time our own decoder's steps (``llm/decoder.py``, the engine ``rightsize serve`` runs) on this machine's device.

    python benchmarks/gpu/llm_steps.py --out steps.json                      # CUDA: Llama 7B, Llama 1B, GPT-2
    python benchmarks/gpu/llm_steps.py --device cpu --models gpt2 --size small --out steps.json  # a smoke run

For each model: prefill of one sequence of T tokens (T = 128, 512, 1024), and one decode step of B sequences
whose caches hold ``--context`` tokens each (B = 1, 8, 32, 64), each step ending as the engine's does
(argmax, ``.tolist()``: the host waits for the device). Wall time per step (median of ``--steps``) and the
host's CPU time for the same steps, so a step whose CPU time is its wall time is host-bound (eager
dispatch), not device-bound. Weights are random (cost does not depend on them), built on the device in
the model's dtype. ``benchmarks/llm_steps_vs_device.py`` compares these with the projection.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from rightsize.llm.decoder import Decoder, lm_config

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def build(model: str, size: str, device: str, dtype: torch.dtype) -> torch.nn.Module:
    """``model`` (a zoo decoder) with random weights, built on ``device`` in ``dtype``, in eval mode."""
    from transformers import AutoModelForCausalLM

    if model == "llama-7b":
        from rightsize.models.zoo import llama_config

        config = llama_config("llama-7b", tiny=size == "tiny")
    else:
        config = lm_config(model, size)
    torch.manual_seed(0)
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # built in its dtype: a 7B model never exists in fp32
    try:
        with torch.device(device):
            lm = AutoModelForCausalLM.from_config(config)
    finally:
        torch.set_default_dtype(default)
    return lm.to(dtype).eval()


def _timed(fn: Any, device: str, n: int) -> dict[str, float]:
    """Medians over n calls, after 2 warm-ups, of: wall ms; ms until the model call returned (the host's
    dispatch: kernels run asynchronously on a GPU, so launch ≈ wall means host-bound); the calling thread's
    CPU ms. ``fn`` launches and returns a callable that waits for the result."""
    for _ in range(2):
        fn()()
    _sync(device)
    walls, launches, cpus = [], [], []
    for _ in range(n):
        w0, c0 = time.perf_counter(), time.thread_time()
        finish = fn()
        launches.append((time.perf_counter() - w0) * 1e3)
        finish()
        _sync(device)
        walls.append((time.perf_counter() - w0) * 1e3)
        cpus.append((time.thread_time() - c0) * 1e3)
    return {"wall_ms": round(statistics.median(walls), 3), "launch_ms": round(statistics.median(launches), 3),
            "cpu_ms": round(statistics.median(cpus), 3)}  # fmt: skip


def measure(model: str, size: str, device: str, precision: str, batches: list[int], prompts: list[int],
            context: int, steps: int) -> dict[str, Any]:  # fmt: skip
    t0 = time.perf_counter()
    lm = build(model, size, device, DTYPES[precision])
    built_s = time.perf_counter() - t0
    max_len = max([*prompts, context + steps + 4])
    dec = Decoder(lm, slots=max(batches), max_len=max_len)
    del lm
    if device == "cuda":
        torch.cuda.empty_cache()
    out: dict[str, Any] = {"model": model, "size": size, "precision": precision, "context": context,
                           "build_s": round(built_s, 1)}  # fmt: skip
    out |= _steps(dec, device, precision, batches, prompts, context, steps, model)
    dec.k_cache.clear()  # the caches are most of the device memory: free them before the next model
    dec.v_cache.clear()
    if device == "cuda":
        torch.cuda.empty_cache()
    return out


def _steps(dec: Decoder, device: str, precision: str, batches: list[int], prompts: list[int], context: int,
           steps: int, model: str) -> dict[str, Any]:  # fmt: skip
    out: dict[str, Any] = {"prefill": [], "decode": []}
    gen = torch.Generator().manual_seed(0)
    for t in prompts:
        ids = torch.randint(0, dec.vocab_size, (t,), generator=gen).tolist()

        def prefill(ids: list[int] = ids) -> Any:
            logits = dec.prefill(0, ids)
            return lambda: int(logits.argmax())

        out["prefill"].append({"tokens": t, **_timed(prefill, device, max(3, steps // 4))})
    for b in batches:
        slots = list(range(b))
        last = torch.randint(0, dec.vocab_size, (b,), generator=gen).tolist()

        def step(slots: list[int] = slots, last: list[int] = last) -> Any:
            for s in slots:  # every step at the same context: the cost does not drift
                dec.lengths[s] = context
            logits = dec.decode(slots, last)
            return lambda: logits.argmax(-1).tolist()

        r = _timed(step, device, steps)
        out["decode"].append({"batch": b, **r})
        print(f"{model} {precision} decode b={b} ctx={context}: {r}", flush=True)
    if device == "cuda":  # does a decode step wait for the device inside (a hidden sync), or only at its end?
        import warnings

        torch.cuda.set_sync_debug_mode("warn")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            dec.decode(list(range(batches[0])), [0] * batches[0])
        torch.cuda.set_sync_debug_mode("default")
        out["syncs_in_decode_step"] = sorted({str(w.message).splitlines()[0][:120] for w in caught})
    return out


def host_us_per_op(device: str, n: int = 2000) -> float:
    """The host's time to dispatch one small eager op (an in-place add), microseconds: the unit of eager
    host floors."""
    x = torch.zeros(16, device=device)
    for _ in range(200):
        x.add_(1.0)
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(n):
        x.add_(1.0)
    t = time.perf_counter() - t0
    _sync(device)
    return round(t / n * 1e6, 2)


def environment(device: str) -> dict[str, Any]:
    env: dict[str, Any] = {"torch": torch.__version__, "python": platform.python_version(),
                           "host_cpu": platform.processor() or platform.machine()}  # fmt: skip
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines()
    except OSError:
        cpuinfo = []
    names = [line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")]
    if names:
        env["host_cpu"] = names[0]
    if device == "cuda":
        p = torch.cuda.get_device_properties(0)
        env |= {"gpu": p.name, "gpu_memory_gib": round(p.total_memory / 2**30, 1), "cuda": torch.version.cuda,
                "sm_count": p.multi_processor_count}  # fmt: skip
    import transformers

    env["transformers"] = transformers.__version__
    env["host_us_per_op"] = host_us_per_op(device)
    mhz = [float(line.split(":")[1]) for line in cpuinfo if line.startswith("cpu MHz")]
    env["host_mhz"] = round(statistics.median(mhz)) if mhz else None
    return env


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--models", default="llama-7b,llama-1b,gpt2")
    ap.add_argument("--size", default="full", help="full (the zoo's shapes), small or tiny")
    ap.add_argument("--precision", default="fp16", choices=sorted(DTYPES))
    ap.add_argument("--batches", default="1,8,32,64")
    ap.add_argument("--prompts", default="128,512,1024")
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    batches = [int(x) for x in a.batches.split(",")]
    prompts = [int(x) for x in a.prompts.split(",")]
    result: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"), "env": environment(a.device), "runs": []}
    for model in a.models.split(","):
        result["runs"].append(measure(model, a.size, a.device, a.precision, batches, prompts, a.context, a.steps))
        result["runs"][-1]["host_us_per_op_after"] = host_us_per_op(a.device)  # did the host's speed drift?
        with open(a.out, "w", encoding="utf-8") as f:  # after each model: a timeout keeps what was measured
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
