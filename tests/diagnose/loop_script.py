"""A small training loop for tests/diagnose: `starved` (slow decoding, no loader workers), `healthy`, or
`forever` (healthy, never ending: stopped by `diagnose --timeout`)."""

import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

STARVED = sys.argv[1] == "starved"


class Samples(Dataset):  # type: ignore[type-arg]
    def __len__(self) -> int:
        return 64 * 4

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        if STARVED:
            time.sleep(0.004)  # a slow decode
        return torch.randn(256), int(i % 2)


model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loader = DataLoader(Samples(), batch_size=64, num_workers=0)
EPOCHS = 3 if STARVED else 10**9 if sys.argv[1] == "forever" else 6
for _epoch in range(EPOCHS):
    for x, y in loader:
        for _ in range(1 if STARVED else 6):
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
