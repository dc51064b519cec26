"""A segmentation training pipeline shuffles the images and the ground truth separately.

Source: https://github.com/mlcommons/GaNDLF/pull/870 (related PR #868, 2024-05-20).
Root cause (as the maintainers reported): "there is a bug with the training pipeline,
where the data and ground truth label are getting shuffled separately", so each image is
trained against another subject's mask; the fix keeps the training batches in the same
order as the ground truth.
Re-created: a small fully convolutional segmenter, per-pixel cross-entropy, Adam lr 1e-3,
batch 8, where the ground-truth masks are drawn in an independently shuffled order;
differs from the original: 3-D medical volumes replaced by seeded 24x24 images with 2
region classes, 200 steps, a plain list of batches in place of the queue-based loader.
Fix: one permutation for images and masks together.
Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import accuracy, batched, fixed_from_env, generator, split  # noqa: E402

KIND = "failure"
STEPS = 200
HARM_METRIC = "val_acc"


def data(seed: int, n: int):
    g = generator(seed)
    centres = torch.randint(6, 18, (n, 2), generator=g)
    yy, xx = torch.meshgrid(torch.arange(24), torch.arange(24), indexing="ij")
    r = ((yy - centres[:, :1, None]) ** 2 + (xx - centres[:, 1:, None]) ** 2).float().sqrt()
    mask = (r < 5).long()
    img = mask.float().unsqueeze(1) + 0.6 * torch.randn(n, 1, 24, 24, generator=g)
    return img, mask


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = data(seed, 1000)
    Xt, yt, Xv, yv = split(X, y, 200)
    image_order = torch.randperm(len(Xt), generator=generator(seed + 1))
    if fixed:
        label_order = image_order  # FIX: one permutation for data and ground truth
    else:
        label_order = torch.randperm(len(yt), generator=generator(seed + 2))  # BUG: shuffled separately
    Xt, yt = Xt[image_order], yt[label_order]
    criterion = nn.CrossEntropyLoss()

    def step(model, optimizer, batch):
        image, label = batch
        optimizer.zero_grad()
        loss = criterion(model(image), label)
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=lambda: nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
                                            nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
                                            nn.Conv2d(16, 2, 1)),
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-3),
                batches=batched(Xt, yt, 8), step=step, loss=criterion,
                val_batches=batched(Xv, yv, 100), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_acc": accuracy(model, val_batches)}
