"""A chest X-ray classifier head drops 90% of its features: Dropout(0.9) written as a keep rate.

Source: https://github.com/Gofinge/CheXpert_Baseline_PyTorch/issues/5 (2019-12-25); the
author the same day: "Nope, I think it was a mistake, I thought the p means kept rate.
So it should be 0.1" (models/densenet.py now has nn.Dropout(p=0.1)).  The author added
that his results were nevertheless close to the paper's.
Root cause (as the thread established it): the DenseNet classifier head was
Linear(F, F) -> Dropout(0.9) -> Linear(F, classes) -> Sigmoid; PyTorch's p is the
probability of ZEROING a unit, so 90% of the head's features were dropped (and the rest
scaled by 10) at every training step.  The fix is p=0.1.
Re-created: the head exactly (Linear(F, F), Dropout, Linear(F, 6), Sigmoid), BCELoss over
6 findings (multi-label), Adam with betas (0.9, 0.999), eps 1e-8, weight decay 1e-5,
batch 16; the yardstick is the validation BCE in eval mode;
differs from the original: the ImageNet-pretrained DenseNet-121 on 320x320 CheXpert
images replaced by a 3-block conv net trained from scratch (F = 64) on seeded 1x32x32
images in which each of the 6 findings adds its own faint pattern; learning rate 1e-3
instead of 1e-4 (no pretrained features to start from); 300 steps instead of 5 epochs.
Fix: nn.Dropout(p=0.1).  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import batched, fixed_from_env, generator, mean_loss  # noqa: E402

KIND = "failure"
STEPS = 300
HARM_METRIC = "val_loss"
FINDINGS, SIDE, FEATURES = 6, 32, 64


def radiographs(seed: int, n: int):
    """Seeded images in [0, 1]; each present finding adds its own smooth pattern."""
    g = generator(seed)
    anatomy = F.avg_pool2d(torch.rand(1, 1, SIDE, SIDE, generator=g), 7, 1, 3)
    patterns = F.avg_pool2d(torch.rand(FINDINGS, 1, SIDE, SIDE, generator=g), 5, 1, 2)
    patterns = (patterns - patterns.mean((2, 3), keepdim=True)) * 3
    labels = (torch.rand(n, FINDINGS, generator=g) < 0.3).float()
    x = anatomy + torch.einsum("nk,khw->nhw", labels, patterns[:, 0]).unsqueeze(1)
    x = x + 0.25 * torch.randn(n, 1, SIDE, SIDE, generator=g)
    return x.clamp(0, 1), labels


def densenet_like(fixed: bool) -> nn.Module:
    def block(cin, cout):
        return [nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(),
                nn.MaxPool2d(2)]
    features = nn.Sequential(*block(1, 16), *block(16, 32), *block(32, FEATURES),
                             nn.AdaptiveAvgPool2d(1), nn.Flatten())
    p = 0.1 if fixed else 0.9  # BUG: p=0.9, meant as a keep rate  # FIX: p=0.1
    classifier = nn.Sequential(nn.Linear(FEATURES, FEATURES), nn.Dropout(p=p),
                               nn.Linear(FEATURES, FINDINGS), nn.Sigmoid())
    return nn.Sequential(features, classifier)


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    x, y = radiographs(seed, 6400)
    criterion = nn.BCELoss()

    def step(model, optimizer, batch):
        data, label = batch
        optimizer.zero_grad()
        score = model(data)
        loss = criterion(score, label)
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=lambda: densenet_like(fixed),
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-3, betas=(0.9, 0.999),
                                                     eps=1e-8, weight_decay=1e-5),
                batches=batched(x[:4800], y[:4800], 16), step=step, loss=criterion,
                val_batches=batched(x[4800:], y[4800:], 200), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_loss": mean_loss(model, val_batches, F.binary_cross_entropy)}
