"""The PyTorch quickstart's FashionMNIST model put a ReLU on its output logits.

Source: https://github.com/pytorch/tutorials/pull/1644 (fixes issue #1526, 2021-08-09).
Root cause (as the issue and the merged fix established it): the quickstart's
NeuralNetwork ended Linear(512, 10) -> ReLU, and its output went to CrossEntropyLoss; the
ReLU clamps every negative logit to 0 so the loss cannot push wrong classes down; the fix
removed the ReLU.
Re-created: 784 -> 512 -> 512 -> 10 with ReLUs, SGD lr 1e-3, batch 64, CrossEntropyLoss,
as in the quickstart;
differs from the original: FashionMNIST replaced by seeded 28x28 images in [0, 1];
lr 1e-2 instead of 1e-3 so that 300 steps cover what the tutorial's 5 epochs do
(at 1e-3 neither version moves far in a few seconds).
Fix: drop the final ReLU.  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import accuracy, batched, fixed_from_env, pixels, split  # noqa: E402

KIND = "failure"
STEPS = 300
HARM_METRIC = "val_acc"


def make_model(fixed: bool) -> nn.Module:
    layers = [nn.Flatten(), nn.Linear(28 * 28, 512), nn.ReLU(), nn.Linear(512, 512),
              nn.ReLU(), nn.Linear(512, 10)]
    if not fixed:
        layers.append(nn.ReLU())  # BUG: ReLU on the logits  # FIX: no activation after the last Linear
    return nn.Sequential(*layers)


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = pixels(seed, 6000 + 1000, 28, 10, noise=0.5)
    Xt, yt, Xv, yv = split(X, y, 1000)
    loss_fn = nn.CrossEntropyLoss()

    def step(model, optimizer, batch):
        X, y = batch
        pred = model(X)
        loss = loss_fn(pred, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=lambda: make_model(fixed),
                optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=1e-2),
                batches=batched(Xt, yt, 64), step=step, loss=loss_fn,
                val_batches=batched(Xv, yv, 500), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_acc": accuracy(model, val_batches)}
