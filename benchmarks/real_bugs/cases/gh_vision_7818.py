"""FGVC-Aircraft samples come in class order, and an unshuffled loader trains badly.

Source: https://github.com/pytorch/vision/issues/7818 (2023-08-09).
Root cause (as the reporter measured and the maintainer agreed is expected): the
FGVCAircraft dataset lists its samples class by class, so training with a loader that does
not shuffle gives "much worse/biased performance"; the DataLoader should shuffle.
Re-created: fine-grained classification (100 classes) with a linear classifier on fixed
features, Adam, batch 32, one pass over class-ordered samples;
differs from the original: backbone features replaced by seeded 64-d class clusters
(100 classes x 32 samples), 100 steps = one epoch, lr 1e-2 so that one short epoch
learns.
Fix: shuffle=True.  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import accuracy, batched, blobs, fixed_from_env, generator, split  # noqa: E402

KIND = "failure"
STEPS = 100
HARM_METRIC = "val_acc"


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = blobs(seed, 3200 + 1000, 64, 100, noise=0.9)
    Xt, yt, Xv, yv = split(X, y, 1000)
    order = torch.argsort(yt, stable=True)  # the annotation file lists samples class by class
    Xt, yt = Xt[order], yt[order]
    if fixed:
        perm = torch.randperm(len(yt), generator=generator(seed + 1))
        Xt, yt = Xt[perm], yt[perm]  # FIX: DataLoader(..., shuffle=True)
    # BUG: DataLoader(dataset, batch_size=32) keeps the class order
    criterion = nn.CrossEntropyLoss()

    def step(model, optimizer, batch):
        features, labels = batch
        optimizer.zero_grad()
        loss = criterion(model(features), labels)
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=lambda: nn.Linear(64, 100),
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-2),
                batches=batched(Xt, yt, 32), step=step, loss=criterion,
                val_batches=batched(Xv, yv, 500), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_acc": accuracy(model, val_batches)}
