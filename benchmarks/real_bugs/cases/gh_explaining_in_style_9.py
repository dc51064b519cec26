"""A CelebA "Male" classifier stays at chance: images and labels are not in the same order.

Source: https://github.com/NoahVl/Explaining-In-Style-Reproducibility-Study/issues/9
(2022-05-19/21).
Root cause (as the reporter found it and a second user confirmed the fix): the CelebA
Dataset lists its images with os.listdir(), whose order is arbitrary, and pairs the i-th
image with the i-th row of list_attr_celeba.csv, which is sorted by file name -- so the
labels do not belong to their images, in training and in validation alike. Sorting the
file list fixes it.
Re-created: the notebook's CelebA Dataset pairing by index, label 0 for "Male" and 1
otherwise, random_split 70/15/15 with generator seed 42, cross-entropy, Adam, batch 128,
validation accuracy on the validation split as validate_model computes it;
differs from the original: CelebA replaced by seeded 3x16x16 "face" images whose class
(42 % male, as in CelebA) sets a colour pattern, 3000 files listed in a seeded arbitrary
order (the directory's os.listdir order); a small CNN trained from scratch instead of a
pretrained ResNet fine-tuned layer by layer, hence Adam lr 1e-3 instead of 1e-4;
150 steps instead of three epochs.
Fix: sort the listed file names so that they match the CSV's order.  Run fixed:
FAILURELAB_FIX=1 or parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import accuracy, batched, fixed_from_env, generator  # noqa: E402

KIND = "failure"
STEPS = 150
HARM_METRIC = "val_acc"
FILES, SIDE = 3000, 16


def celeba_like(seed: int):
    """Files 000001.jpg.. in name order: images, and the CSV's Male column (1 / -1)."""
    g = generator(seed)
    patterns = F.avg_pool2d(torch.rand(2, 3, SIDE, SIDE, generator=g), 5, 1, 2)
    patterns = (patterns - patterns.mean()) / patterns.std() * 0.2 + 0.5
    male = torch.rand(FILES, generator=g) < 0.42
    images = patterns[(~male).long()] + 0.3 * torch.randn(FILES, 3, SIDE, SIDE, generator=g)
    listdir_order = torch.randperm(FILES, generator=g)  # the directory's arbitrary order
    return images, torch.where(male, 1, -1), listdir_order


def make_model() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(32 * 4 * 4, 64), nn.ReLU(), nn.Linear(64, 2))


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    files, csv_male, listdir_order = celeba_like(seed)
    if fixed:
        images = files[listdir_order.sort().values]  # FIX: sorted(os.listdir(image_path))
    else:
        images = files[listdir_order]  # BUG: os.listdir(image_path), in arbitrary order
    labels = torch.where(csv_male == 1, 0, 1)  # row i of the CSV, "Male will be 0"
    order = torch.randperm(FILES, generator=generator(42))  # random_split(..., seed 42)
    n_train, n_val = int(FILES * 0.7), int(FILES * 0.15)
    train, val = order[:n_train], order[n_train:n_train + n_val]
    criterion = nn.CrossEntropyLoss()

    def step(model, optimizer, batch):
        data, target = batch
        optimizer.zero_grad()
        output = model(data)
        loss = criterion(output, target)
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=make_model,
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-3),
                batches=batched(images[train], labels[train], 128), step=step,
                loss=criterion, val_batches=batched(images[val], labels[val], 128),
                steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_acc": accuracy(model, val_batches)}
