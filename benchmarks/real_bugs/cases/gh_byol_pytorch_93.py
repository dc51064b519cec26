"""A BYOL trainer zeroes the gradients right before optimizer.step(): nothing is ever learned.

Source: https://github.com/lucidrains/byol-pytorch/issues/93 (2024-07-15); the author's
reply the same day ("thanks!") and the fix in byol_pytorch/trainer.py, which now calls
`self.optimizer.step()` then `self.optimizer.zero_grad()`.
Root cause (as the issue established it): BYOLTrainer.forward ran
`loss = self.byol(images); self.accelerator.backward(loss)`, then
`self.optimizer.zero_grad(); self.optimizer.step()`, so every gradient was cleared
between backward() and step() and Adam never moved a weight; the target network's
moving average then tracks an online network that does not change.
Re-created: BYOL as the library builds it -- an online encoder with an MLP projector
(Linear-BatchNorm-ReLU-Linear) and an MLP predictor, a target encoder+projector that is
a copy of the online one, frozen and updated by an exponential moving average (decay
0.99) after each step, two random augmentations of each image, the loss
2 - 2 cos(online prediction, target projection) for both view orders, Adam, the
trainer's default batch 16;
differs from the original: the ResNet on 256x256 images replaced by a 3-layer conv
encoder on seeded 3x16x16 images, projection 32 / hidden 128 instead of 256 / 4096,
augmentations reduced to flips, shifts, brightness and noise (torchvision's colour
jitter, blur and resized crop are not used); learning rate 3e-4 (the README's);
150 steps; no accelerate wrapper.
Fix: optimizer.step() before optimizer.zero_grad().  Run fixed: FAILURELAB_FIX=1.
"""
import copy
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import batched, fixed_from_env, generator  # noqa: E402

KIND = "failure"
STEPS = 150
HARM_METRIC = "train_loss"
SIDE, KINDS, DECAY = 16, 10, 0.99


def images(seed: int, n: int):
    """Seeded colour images in [0, 1]: one of KINDS smooth patterns plus noise."""
    g = generator(seed)
    patterns = F.avg_pool2d(torch.rand(KINDS, 3, SIDE, SIDE, generator=g), 5, 1, 2)
    patterns = (patterns - patterns.mean()) / patterns.std() * 0.25 + 0.5
    kind = torch.randint(KINDS, (n,), generator=g)
    return (patterns[kind] + 0.1 * torch.randn(n, 3, SIDE, SIDE, generator=g)).clamp(0, 1)


def augment(x):
    """A random view: horizontal flip, a shift of up to 2 pixels, brightness, noise."""
    flip = torch.rand(len(x), 1, 1, 1) < 0.5
    x = torch.where(flip, x.flip(3), x)
    dx, dy = torch.randint(-2, 3, (2,)).tolist()
    x = torch.roll(x, shifts=(dy, dx), dims=(2, 3))
    x = x * (0.8 + 0.4 * torch.rand(len(x), 1, 1, 1))
    return x + 0.05 * torch.randn_like(x)


def mlp(dim, hidden, out):
    return nn.Sequential(nn.Linear(dim, hidden), nn.BatchNorm1d(hidden), nn.ReLU(),
                         nn.Linear(hidden, out))


def loss_fn(x, y):
    return 2 - 2 * (F.normalize(x, dim=-1) * F.normalize(y, dim=-1)).sum(dim=-1)


class BYOL(nn.Module):
    def __init__(self):
        super().__init__()
        encoder = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                                nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32),
                                nn.ReLU(), nn.Conv2d(32, 64, 3, stride=2, padding=1),
                                nn.BatchNorm2d(64), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                                nn.Flatten())
        self.online_encoder = nn.Sequential(encoder, mlp(64, 128, 32))
        self.online_predictor = mlp(32, 128, 32)
        self.target_encoder = copy.deepcopy(self.online_encoder)
        self.target_encoder.requires_grad_(False)

    @torch.no_grad()
    def update_moving_average(self):
        for online, target in zip(self.online_encoder.parameters(),
                                  self.target_encoder.parameters(), strict=True):
            target.mul_(DECAY).add_(online, alpha=1 - DECAY)

    def forward(self, x):
        one, two = augment(x), augment(x)
        online = self.online_predictor(self.online_encoder(torch.cat([one, two])))
        with torch.no_grad():
            target = self.target_encoder(torch.cat([one, two]))
        pred_one, pred_two = online.chunk(2)
        target_one, target_two = target.chunk(2)
        return (loss_fn(pred_one, target_two) + loss_fn(pred_two, target_one)).mean()


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    x = images(seed, 1600)

    def step(byol, optimizer, batch):
        images_, _ = batch
        loss = byol(images_)
        loss.backward()
        if fixed:
            optimizer.step()  # FIX: step on the gradients, then clear them
            optimizer.zero_grad()
        else:
            optimizer.zero_grad()  # BUG: the gradients are cleared before the step
            optimizer.step()
        byol.update_moving_average()
        return loss

    return dict(model=BYOL,
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=3e-4),
                batches=batched(x, torch.zeros(len(x)), 16), step=step, loss=None,
                val_batches=None, steps=STEPS, seed=seed)
