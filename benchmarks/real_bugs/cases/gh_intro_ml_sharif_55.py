"""Control: "optimizer.zero_grad() is called after optimizer.step(), so gradients accumulate".

Source: https://github.com/SharifiZarchi/Introduction_to_Machine_Learning/issues/55
(2024-11-27).
What the report claims: calling zero_grad() after step() lets "gradients from the current
batch remain in memory and accumulate with the gradients of subsequent batches".  That
claim is mistaken: zero_grad() at the end of iteration k clears the gradients before the
backward() of iteration k+1, which is the same as clearing them at its start; the course
notebook's training is healthy.  (We did not find a maintainer's reply in the stored
thread; the healthy reading is what the order of calls implies and what our runs measure:
buggy and "fixed" histories are identical.)
Re-created: a small MLP classifier, cross-entropy, SGD lr 0.1 momentum 0.9, batch 64,
the loop body backward -> step -> zero_grad;
differs from the original: the course notebook's data replaced by seeded 2-d-separable
tabular data (10 features, 4 classes), 200 steps.
Fix: none needed; FAILURELAB_FIX=1 moves zero_grad() to the top of the loop.
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import accuracy, batched, blobs, fixed_from_env, split  # noqa: E402

KIND = "control"
STEPS = 200
HARM_METRIC = "val_acc"


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = blobs(seed, 5000, 10, 4, noise=1.5)
    Xt, yt, Xv, yv = split(X, y, 1000)
    criterion = nn.CrossEntropyLoss()

    def step(model, optimizer, batch):
        x, target = batch
        if fixed:
            optimizer.zero_grad()  # the report's preferred place
        loss = criterion(model(x), target)
        loss.backward()
        optimizer.step()
        if not fixed:
            optimizer.zero_grad()  # the notebook's place: equally correct
        return loss

    return dict(model=lambda: nn.Sequential(nn.Linear(10, 64), nn.ReLU(), nn.Linear(64, 4)),
                optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9),
                batches=batched(Xt, yt, 64), step=step, loss=criterion,
                val_batches=batched(Xv, yv, 500), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_acc": accuracy(model, val_batches)}
