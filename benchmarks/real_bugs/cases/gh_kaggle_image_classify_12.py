"""An image-classification dataset is shuffled after its raw labels were taken.

Source: https://github.com/Borda/kaggle_image-classify/pull/12 (merged 2021-05-19).
Root cause (as the PR states): "the shuffle was made after taking raw labels", so the
image list was shuffled while the label list kept the original order -- every image
trained against some other image's label; the fix shuffles the (image, label) pairs.
Re-created: a small CNN classifier (the repository fine-tunes a timm backbone) with
cross-entropy, AdamW lr 1e-3, batch 32;
differs from the original: the Kaggle plant-pathology images replaced by seeded 16x16
images of 6 classes, a small CNN in place of the pretrained backbone, 200 steps.
Fix: shuffle images and labels together.  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import accuracy, batched, fixed_from_env, generator, pixels, split  # noqa: E402

KIND = "failure"
STEPS = 200
HARM_METRIC = "val_acc"


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = pixels(seed, 3000 + 600, 16, 6, noise=0.4)
    Xt, raw_labels, Xv, yv = split(X, y, 600)
    perm = torch.randperm(len(Xt), generator=generator(seed + 1))
    images = Xt[perm]
    if fixed:
        labels = raw_labels[perm]  # FIX: the labels follow their images
    else:
        labels = raw_labels  # BUG: labels taken before the shuffle, left in the old order
    criterion = nn.CrossEntropyLoss()

    def step(model, optimizer, batch):
        imgs, targets = batch
        optimizer.zero_grad()
        loss = criterion(model(imgs), targets)
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=lambda: nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
                                            nn.MaxPool2d(2), nn.Flatten(),
                                            nn.Linear(16 * 8 * 8, 6)),
                optimizer=lambda m: torch.optim.AdamW(m.parameters(), lr=1e-3),
                batches=batched(images, labels, 32), step=step, loss=criterion,
                val_batches=batched(Xv, yv, 300), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_acc": accuracy(model, val_batches)}
