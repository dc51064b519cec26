"""The capstone's loop of one's own: a small classifier whose step has one line of the
textbook step missing, handed over as `fl.investigate`'s parts.  It lives here, not in
the notebook, so the notebook stays prose, a prediction, one call and a table."""

from __future__ import annotations

import torch
from torch import nn

SAMPLES, FEATURES, CLASSES, BATCH = 384, 8, 3, 32


def make_model() -> nn.Module:
    return nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Linear(32, CLASSES))


def make_optimizer(model: nn.Module) -> torch.optim.Optimizer:
    return torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)


def my_step(model, optimizer, batch):  # one line of the textbook step is missing
    x, target = batch
    loss = nn.functional.cross_entropy(model(x), target)
    loss.backward()
    optimizer.step()
    return loss


def planted_loop(seed: int = 0) -> dict:
    """`fl.investigate`'s keyword arguments for the loop above, on seeded data whose
    labels a linear teacher gives (learnable: a healthy step trains it)."""
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(SAMPLES, FEATURES, generator=g)
    y = (X @ torch.randn(FEATURES, CLASSES, generator=g)).argmax(1)
    batches = [(X[i:i + BATCH], y[i:i + BATCH]) for i in range(0, SAMPLES, BATCH)]
    return dict(model=make_model, optimizer=make_optimizer, batches=batches, step=my_step,
                loss=nn.functional.cross_entropy)
