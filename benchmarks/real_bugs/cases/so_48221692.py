"""A small network fitting y = x^2 + 3 predicts values below 1 for every input (ported from Keras).

Source: https://stackoverflow.com/questions/48221692; code as reproduced in
mehilshah/Bug_Reproducibility_DL_Bugs, Bugs/026 (commit 11b01d6); fix as recorded in the
DeepFD benchmark's patch (ArabelaTso/DeepFD, Benchmark-with-patches.xlsx row 20).
Root cause (as the patch establishes it): the regression output layer is
Dense(1, activation='sigmoid'), whose output can never leave (0, 1) while the targets
run from 3 to 103; the patch makes the output linear.
Re-created, ported line by line to PyTorch: x = -10.0 .. 10.0 in steps of 0.1 (201
points), y = x^2 + 3, a 75/25 train/test split; Dense(5, sigmoid) -> Dense(1, sigmoid);
mean squared error; SGD with Keras' default lr 0.01; full-batch steps;
differs from the original: the split drawn from a seeded generator (the post used
train_test_split without a seed); 400 steps instead of 1000 epochs.
Fix: Dense(1, activation='linear').  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import fixed_from_env, generator  # noqa: E402

KIND = "failure"
STEPS = 400
HARM_METRIC = "val_loss"


def make_model(fixed: bool) -> nn.Module:
    return nn.Sequential(nn.Linear(1, 5), nn.Sigmoid(), nn.Linear(5, 1),
                         nn.Identity() if fixed  # FIX: Dense(1, activation='linear')
                         else nn.Sigmoid())  # BUG: Dense(1, activation='sigmoid')


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    x = torch.arange(-100, 101).float().unsqueeze(1) / 10
    y = x ** 2 + 3
    order = torch.randperm(len(x), generator=generator(seed))
    train, test = order[:150], order[150:]
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
                batches=[(x[train], y[train])], step=step, loss=loss_fn,
                val_batches=[(x[test], y[test])], steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    with torch.no_grad():
        return {"val_loss": float(sum(nn.functional.mse_loss(model(x), y)
                                      for x, y in val_batches) / len(val_batches))}
