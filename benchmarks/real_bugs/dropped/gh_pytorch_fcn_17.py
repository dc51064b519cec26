"""An FCN trained with the per-pixel SUMMED loss at the normalised loss's lr goes NaN.

Source: https://github.com/wkentaro/pytorch-fcn/issues/17 (2017-03-28).
Root cause (as the maintainer answered): the training script sums the cross-entropy over
all pixels (size_average=False), and the reporter used lr 1e-4, a rate meant for the
normalised (averaged) loss; "you need to tune the learning rate when you change the loss
function" -- the summed loss multiplies the effective rate by the number of pixels.
Re-created: a small fully convolutional segmenter, pixel-wise cross-entropy summed over
pixels and batch, SGD lr 1e-4 momentum 0.99 (the FCN recipe's momentum);
differs from the original: VGG-16 FCN on PASCAL VOC replaced by a 3-layer conv net on
seeded 32x32 images with 3 region classes, batch 4, 200 steps.
Fix: average the loss (the rate 1e-4 belongs to the normalised loss).
Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import accuracy, batched, fixed_from_env, generator, split  # noqa: E402

KIND = "failure"
STEPS = 200
HARM_METRIC = "val_acc"


def make_model():
    return nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 3, 1))


def data(seed: int, n: int):
    g = generator(seed)
    colours = torch.rand(3, 3, generator=g)
    blocks = torch.randint(3, (n, 4, 4), generator=g)
    label = blocks.repeat_interleave(8, 1).repeat_interleave(8, 2)  # (n, 32, 32)
    img = colours[label].permute(0, 3, 1, 2) + 0.3 * torch.randn(n, 3, 32, 32, generator=g)
    return img, label


def cross_entropy2d(score, target, size_average: bool):
    loss = F.cross_entropy(score, target, reduction="sum")
    if size_average:
        loss = loss / target.numel()
    return loss


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = data(seed, 900)
    Xt, yt, Xv, yv = split(X, y, 100)

    def criterion(score, target):
        return cross_entropy2d(score, target, size_average=fixed)  # BUG: summed at lr 1e-4  # FIX: averaged

    def step(model, optimizer, batch):
        data, target = batch
        optimizer.zero_grad()
        loss = criterion(model(data), target)
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=make_model,
                optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=1e-4, momentum=0.99),
                batches=batched(Xt, yt, 4), step=step, loss=criterion,
                val_batches=batched(Xv, yv, 50), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_acc": accuracy(model, val_batches)}
