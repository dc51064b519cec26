"""Control: "Normalize returns mean 1.75, not 0" -- the ImageNet statistics on bright images.

Source: https://github.com/pytorch/vision/issues/642 (2018-10-28); the reporter found
the answer and a maintainer (soumith) confirmed it (2018-10-30).
What the thread established: nothing is wrong with torchvision or with training.
`Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])` subtracts and divides
by the statistics it is *given*; on the reporter's bright images (channel means ~0.87,
stds ~0.19 after ToTensor) that yields means ~1.75-1.90 and stds ~0.80-0.85, not 0 and 1.
The arguments are the input's statistics, not the target's; a network trains on such
inputs all the same.  Healthy training: there is no fix.
Re-created: ToTensor-scaled RGB images normalised with the ImageNet mean and std, a
small CNN (two 3x3 conv + ReLU + max-pool blocks of 16/32 channels, linear head over 4
classes), cross-entropy, Adam lr 1e-3, batch 32; differs from the original: seeded
3x16x16 bright images (a pale background near 0.87, each class a darker pattern)
instead of the reporter's photos (no training loop was posted; this is the usual
classifier such a pipeline feeds); 200 steps.
Fix: none (a healthy report).  FAILURELAB_FIX changes nothing.
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import accuracy, batched, fixed_from_env, generator, split  # noqa: E402

KIND = "control"
STEPS = 200
HARM_METRIC = "val_acc"
CLASSES, SIDE = 4, 16
IMAGENET_MEAN = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
IMAGENET_STD = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)


def bright_images(seed: int, n: int):
    """ToTensor-range images: pale background ~0.87, a darker class pattern, noise."""
    g = generator(seed)
    patterns = (torch.rand(CLASSES, 1, SIDE, SIDE, generator=g) < 0.25).float()
    y = torch.randint(CLASSES, (n,), generator=g)
    x = 0.87 - 0.45 * patterns[y] + 0.12 * torch.randn(n, 3, SIDE, SIDE, generator=g)
    return x.clamp(0, 1), y


def make_model() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(32 * 4 * 4, CLASSES))


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed  # a control: nothing to fix
    x, y = bright_images(seed, 3000)
    x = (x - IMAGENET_MEAN) / IMAGENET_STD  # transforms.Normalize(ImageNet mean, std)
    Xt, yt, Xv, yv = split(x, y, 600)
    criterion = nn.CrossEntropyLoss()

    def step(model, optimizer, batch):
        images, labels = batch
        optimizer.zero_grad()
        loss = criterion(model(images), labels)
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=make_model,
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-3),
                batches=batched(Xt, yt, 32), step=step, loss=criterion,
                val_batches=batched(Xv, yv, 200), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_acc": accuracy(model, val_batches)}
