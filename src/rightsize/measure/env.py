"""Environment fingerprint: what machine and software measured a result.

The id hashes the fields that change performance (CPU model, cores, ISA, RAM, GPUs, torch), so
results from two machines never mix and results from the same machine are reused.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
from pathlib import Path
from typing import Any

import psutil

from rightsize.profile import Environment

# ISA flags that change deep-learning kernels' speed (from /proc/cpuinfo "flags").
# avx512_vp2intersect: among AMD server cores only Zen 5 has it (its AVX-512 runs on 512-bit units).
ISA_FLAGS = (
    "avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx512_vp2intersect",
    "amx_bf16", "amx_int8", "amx_tile",
)  # fmt: skip


def _cpuinfo() -> tuple[str, list[str], str]:
    """(model name, ISA flags of ``ISA_FLAGS`` present, signature "family/model" or "")."""
    model, flags = platform.processor() or "unknown", ""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return model, [], ""
    if m := re.search(r"^model name\s*:\s*(.+)$", text, re.M):
        model = m.group(1).strip()
    if m := re.search(r"^flags\s*:\s*(.+)$", text, re.M):
        flags = m.group(1)
    present = set(flags.split())
    return model, [f for f in ISA_FLAGS if f in present], cpu_signature(text)


def cpu_signature(cpuinfo: str) -> str:
    """The CPU's "family/model" numbers from /proc/cpuinfo ("25/17": AMD Zen 4 Genoa), "" where it gives none (arm).
    A VM's model name may say only "AMD EPYC"; these numbers still name the generation (catalog.query)."""
    fam = re.search(r"^cpu family\s*:\s*(\d+)\s*$", cpuinfo, re.M)
    mod = re.search(r"^model\s*:\s*(\d+)\s*$", cpuinfo, re.M)
    return f"{fam.group(1)}/{mod.group(1)}" if fam and mod else ""


def _no_nvidia_device() -> bool:
    """No NVIDIA driver or device node: CUDA cannot be there, and torch (a second to import) need not load."""
    return not Path("/proc/driver/nvidia").exists() and not any(Path("/dev").glob("nvidia[0-9]*"))


def _gpus() -> list[dict[str, Any]]:
    if _no_nvidia_device():
        return []
    try:
        import torch
    except ImportError:
        return []
    if not torch.cuda.is_available():
        return []
    out = []
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        out.append(
            {
                "name": p.name,
                "memory_bytes": int(p.total_memory),
                "capability": f"{p.major}.{p.minor}",
                "multiprocessors": p.multi_processor_count,
                "cuda": torch.version.cuda,
            }
        )
    driver = _nvidia_driver()
    for g in out:
        g["driver"] = driver
    return out


def nvidia_driver_version(text: str) -> str | None:
    """The driver version in ``/proc/driver/nvidia/version``'s first line, proprietary ("NVIDIA UNIX x86_64 Kernel
    Module  580.159.04  ...") or open ("NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  ...")."""
    m = re.search(r"Kernel Module.*?\s(\d+\.\d+(?:\.\d+)?)\b", text)
    return m.group(1) if m else None


def _nvidia_driver() -> str | None:
    try:
        return nvidia_driver_version(Path("/proc/driver/nvidia/version").read_text())
    except OSError:
        return None


def _torch_version() -> str | None:
    """The installed torch's version, from its metadata (the same string as ``torch.__version__``, no import)."""
    import importlib.metadata

    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None


# Bumped when the way configs are timed changes what they measure; it joins the environment id, so a
# store's older results are measured again rather than mixed in. 2: the allocator keeps freed memory
# (rightsize.allocator; MobileNetV2 batch 8 ran 2x faster on the same VM).
HARNESS = 2


def fingerprint() -> Environment:
    """This machine's fingerprint; ``id`` is a short hash of the performance-relevant fields."""
    cpu_model, isa, signature = _cpuinfo()
    env: dict[str, Any] = {
        "cpu_model": cpu_model,
        "cpu_signature": signature,
        "machine": platform.machine(),
        "physical_cores": psutil.cpu_count(logical=False) or os.cpu_count() or 1,
        "logical_cores": psutil.cpu_count(logical=True) or 1,
        "isa": isa,
        "ram_bytes": int(psutil.virtual_memory().total),
        "gpus": _gpus(),
        "torch": _torch_version(),
        "python": platform.python_version(),
        "os": f"{platform.system()} {platform.release()}",
        "hostname": platform.node(),
    }
    # cpu_signature stays out of the hash: it was added later, and stored results of this machine stay reused
    key = {k: env[k] for k in ("cpu_model", "machine", "physical_cores", "logical_cores", "isa", "ram_bytes", "torch")}
    key["gpus"] = [g["name"] for g in env["gpus"]]
    key["harness"] = HARNESS  # timings taken by an older harness are not reused
    env["id"] = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
    return Environment.from_dict(env)
