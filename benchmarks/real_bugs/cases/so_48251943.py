"""A 2-4-1 regression network whose ReLU output predicts 0 for everything (ported from Keras).

Source: https://stackoverflow.com/questions/48251943; code as reproduced in
mehilshah/Bug_Reproducibility_DL_Bugs, Bugs/034 (commit 11b01d6); fix as recorded in the
DeepFD benchmark's patch (ArabelaTso/DeepFD, Benchmark-with-patches.xlsx row 5).
Root cause (as the patch establishes it): the output layer is Dense(1,
activation='relu'); once its pre-activation is negative for the inputs (at
initialisation or after an early update) the output is 0 and passes no gradient, so the
network stays a constant 0.  The patch uses tanh on the output.
Re-created, ported line by line to PyTorch: X = rand(100, 2), Y = rand(100, 1) (as in the
reproduction); Dense(4, relu) -> Dense(1, relu); MSE; SGD with Keras' default lr 0.01;
batch 10;
differs from the original: data from a seeded generator; 300 steps (30 epochs) instead
of 500 epochs.  Keras' glorot-uniform weights and zero biases are kept.
Fix: Dense(1, activation='tanh').  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import batched, fixed_from_env, generator  # noqa: E402

KIND = "failure"
STEPS = 300


def glorot(layer: nn.Linear) -> nn.Linear:
    nn.init.xavier_uniform_(layer.weight)
    nn.init.zeros_(layer.bias)
    return layer


def make_model(fixed: bool) -> nn.Module:
    return nn.Sequential(glorot(nn.Linear(2, 4)), nn.ReLU(), glorot(nn.Linear(4, 1)),
                         nn.Tanh() if fixed  # FIX: Dense(1, activation='tanh')
                         else nn.ReLU())  # BUG: Dense(1, activation='relu')


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    g = generator(seed)
    X, Y = torch.rand(100, 2, generator=g), torch.rand(100, 1, generator=g)
    loss_fn = nn.MSELoss()

    def step(model, optimizer, batch):
        inputs, targets = batch
        loss = loss_fn(model(inputs), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=lambda: make_model(fixed),
                optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=0.01),
                batches=batched(X, Y, 10), step=step, loss=loss_fn, val_batches=None,
                steps=STEPS, seed=seed)
