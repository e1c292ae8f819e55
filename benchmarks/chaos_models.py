"""A model for benchmarks/chaos.py's server rows: sleeps like a slow model (t(n) = 60 ms + 10 ms·n).

Served as ``chaos_models:sleepy`` with ``--shape 2`` (the benchmark puts this directory on
PYTHONPATH for the server child); its speed is known, so "3 batch times" is a number.
"""

from __future__ import annotations

import time

import torch
from torch import nn

FIXED_S, PER_SAMPLE_S = 0.06, 0.01


class Sleepy(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(FIXED_S + PER_SAMPLE_S * x.shape[0])
        return x.sum(1, keepdim=True)


def sleepy() -> nn.Module:
    return Sleepy()
