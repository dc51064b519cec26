"""Fitting y = 5x^2 + noise with a small ReLU network: the loss blows up to NaN (ported from Keras).

Source: https://stackoverflow.com/questions/48934338; code as reproduced in
mehilshah/Bug_Reproducibility_DL_Bugs, Bugs/029 (commit 11b01d6); fix as recorded in the
DeepFD benchmark's patch (ArabelaTso/DeepFD, Benchmark-with-patches.xlsx row 13).
Root cause (as the patch establishes it): SGD(lr=0.1) is far too large for targets up
to ~120 under a mean-squared-error loss: the first updates overshoot, the ReLU network's
outputs and gradients grow each step and the loss overflows.  The patch uses lr 1e-4.
Re-created, ported line by line to PyTorch: X = 0.0 .. 4.9 in steps of 0.1 (50 points),
y = 5 X^2 + (standard normal)^3; Dense(50, relu) -> Dense(30, relu) -> Dense(1,
linear); MSE; SGD lr 0.1; batch 32 (Keras' default), shuffled each epoch;
differs from the original: the noise drawn from a seeded generator; 300 steps instead of
1000 epochs; batches in a fixed seeded order.
Fix: SGD(lr=0.0001).  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import fixed_from_env, generator  # noqa: E402

KIND = "failure"
STEPS = 300


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    g = generator(seed)
    X = torch.arange(0, 50).float().unsqueeze(1) / 10
    y = 5 * X ** 2 + torch.randn(50, 1, generator=g) ** 3
    batches = []
    for _ in range(20):  # 20 shuffled epochs of batches of 32, cycled by the harness
        order = torch.randperm(50, generator=g)
        batches += [(X[order[i:i + 32]], y[order[i:i + 32]]) for i in (0, 32)]
    loss_fn = nn.MSELoss()
    lr = 1e-4 if fixed else 0.1  # BUG: SGD(lr=0.1)  # FIX: SGD(lr=0.0001)

    def step(model, optimizer, batch):
        inputs, targets = batch
        loss = loss_fn(model(inputs), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=lambda: nn.Sequential(nn.Linear(1, 50), nn.ReLU(), nn.Linear(50, 30),
                                            nn.ReLU(), nn.Linear(30, 1)),
                optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=lr),
                batches=batches, step=step, loss=loss_fn, val_batches=None,
                steps=STEPS, seed=seed)
