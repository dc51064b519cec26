"""A focal loss computed as -(1 - p_t)^gamma * log(p_t) turns NaN during training.

Source: https://github.com/mathiaszinnen/focal_loss_torch/issues/3 (2021-09-03).
Root cause (as the issue established it and the maintainer's fix adopted): p_t is a
softmax probability; once it underflows to exactly 0, torch.log(p_t) is -inf and the loss
and gradients become non-finite; the fix adds a small epsilon inside the log.
Re-created: multi-class focal loss (gamma 2) written as in the library, on softmax
probabilities, an MLP classifier, Adam lr 1e-2;
differs from the original: seeded tabular data on a raw scale (features x 30) with 10 %
flipped labels -- confident logits on mislabelled samples are what drive p_t to 0 --
batch 64, 300 steps.
Fix: torch.log(p_t + eps).  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import accuracy, batched, blobs, fixed_from_env, generator, split  # noqa: E402

KIND = "failure"
STEPS = 300
HARM_METRIC = "val_acc"
EPS = torch.finfo(torch.float32).eps


def focal_loss(fixed: bool, gamma: float = 2.0):
    def loss(logits, target):
        p_t = torch.softmax(logits, dim=1).gather(1, target[:, None]).squeeze(1)
        if fixed:
            log_p = torch.log(p_t + EPS)  # FIX: epsilon keeps the log finite
        else:
            log_p = torch.log(p_t)  # BUG: p_t underflows to 0 -> log(0) = -inf
        return (-(1 - p_t) ** gamma * log_p).mean()
    return loss


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = blobs(seed, 5000, 20, 5, noise=1.0)
    X = 30 * X
    flip = torch.rand(len(y), generator=generator(seed + 1)) < 0.1
    y = torch.where(flip, torch.randint(5, y.shape, generator=generator(seed + 2)), y)
    Xt, yt, Xv, yv = split(X, y, 1000)
    criterion = focal_loss(fixed)

    def step(model, optimizer, batch):
        x, target = batch
        optimizer.zero_grad()
        loss = criterion(model(x), target)
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=lambda: nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 5)),
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-2),
                batches=batched(Xt, yt, 64), step=step, loss=criterion,
                val_batches=batched(Xv, yv, 500), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_acc": accuracy(model, val_batches)}
