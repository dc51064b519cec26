"""ImageNet training with the default dataloader params sees one class at a time.

Source: https://github.com/Deci-AI/super-gradients/issues/416 (2022-10-03).
Root cause (as the issue established it): the default dataloader params do not pass
shuffle=True, so a SequentialSampler walks the class-sorted ImageNet folder and the network
"sees only examples of a single class, which quickly throws it out of the minima";
passing shuffle=True fixes it.
Re-created: one epoch over class-sorted images, SGD lr 1e-3 momentum 0.9 nesterov, weight
decay 1e-4, cross-entropy, as in the issue's train_params;
differs from the original: ResNet on ImageNet replaced by a small CNN on seeded 10-class
16x16 images (1600 samples, batch 16: 100 steps = 1 epoch), lr 1e-2 instead of 1e-3 so
that one short epoch learns.
Fix: shuffle the training set.  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import accuracy, batched, fixed_from_env, generator, pixels, split  # noqa: E402

KIND = "failure"
STEPS = 100
HARM_METRIC = "val_acc"


def make_model():
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(32, 10))


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = pixels(seed, 1600 + 500, 16, 10, noise=0.4)
    Xt, yt, Xv, yv = split(X, y, 500)
    order = torch.argsort(yt, stable=True)  # the dataset folder is stored class by class
    Xt, yt = Xt[order], yt[order]
    if fixed:
        perm = torch.randperm(len(yt), generator=generator(seed + 1))
        Xt, yt = Xt[perm], yt[perm]  # FIX: shuffle=True
    # BUG: default params, shuffle=False -> SequentialSampler over class-sorted data
    criterion = nn.CrossEntropyLoss()

    def step(model, optimizer, batch):
        inputs, targets = batch
        optimizer.zero_grad()
        loss = criterion(model(inputs), targets)
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=make_model,
                optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=1e-2, momentum=0.9,
                                                    nesterov=True, weight_decay=1e-4),
                batches=batched(Xt, yt, 16), step=step, loss=criterion,
                val_batches=batched(Xv, yv, 250), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_acc": accuracy(model, val_batches)}
