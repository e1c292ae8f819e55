"""How fast this machine's cores are right now: a short single-thread SGEMM.

    gflops = core_gemm_gflops()      # ~0.1 s; e.g. 34.3 on a 2.0 GHz AVX-512 VM core

A VM's core speed depends on its host (other tenants, clocks, which physical CPU the VM landed on):
the same VM type can land on an AVX-512 Xeon one day and an AVX2 EPYC the next, 2.4x slower on the same
DistilBERT config with the load average near zero. Recorded with every CPU measurement
(``extra.core_gemm_gflops``), it lets the projection anchor on what this machine could do at that
moment instead of its datasheet.
"""

from __future__ import annotations

import time

__all__ = ["core_gemm_gflops"]

N = 512  # 2·N³ = 268 MFLOP per call: long enough to time, short enough to repeat


def core_gemm_gflops(repeats: int = 7) -> float:
    """Best-of-``repeats`` single-thread fp32 GEMM rate (GFLOP/s) of the calling process's core."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        a, b = torch.randn(N, N), torch.randn(N, N)
        a @ b  # warm-up: page in, pick the kernel
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            a @ b
            best = min(best, time.perf_counter() - t0)
    finally:
        torch.set_num_threads(threads)
    return 2.0 * N**3 / best / 1e9
