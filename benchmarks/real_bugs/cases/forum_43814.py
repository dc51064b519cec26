"""A 10-class ReLU network's cross-entropy stays at 2.30 (= ln 10) from the first epoch.

Source: https://discuss.pytorch.org/t/cross-entropy-loss-is-not-decreasing/43814 (post 16).
Root cause (as post 16 established it for its author's loop, "loss ... always stays the
same equal to 2.30"): after a few Adam steps almost all parameters were negative and
their gradients exactly zero -- the ReLU units were dead, so nothing could move; the
post's remedies were a smaller learning rate (or SGD instead of Adam).  (The thread's
first answer, softmax fed to CrossEntropyLoss, was not this author's problem.)
Re-created: a ReLU MLP (784 -> 128 -> 64 -> 10), CrossEntropyLoss on logits, Adam, batch
64;
differs from the original: the post's own code is not in our stored copy of the thread,
so the architecture is our choice for 28x28 10-class inputs (seeded stroke images); the
buggy rate is Adam lr 0.1 -- "large" in the post's sense, the value is ours -- and the fix
the post's smaller rate, Adam's default 1e-3; 300 steps.
Fix: lr 1e-3.  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
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


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = pixels(seed, 6000 + 1000, 28, 10, noise=0.5)
    Xt, yt, Xv, yv = split(X, y, 1000)
    lr = 1e-3 if fixed else 0.1  # BUG: a large Adam rate kills the ReLUs  # FIX: smaller rate
    criterion = nn.CrossEntropyLoss()

    def step(model, optimizer, batch):
        images, labels = batch
        optimizer.zero_grad()
        loss = criterion(model(images), labels)
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=lambda: nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(),
                                            nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10)),
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=lr),
                batches=batched(Xt, yt, 64), step=step, loss=criterion,
                val_batches=batched(Xv, yv, 500), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_acc": accuracy(model, val_batches)}
