"""A U-Net's BCE loss goes to -1000s and its validation Dice reads 1.97: the masks are 0/255.

Source: https://github.com/milesial/Pytorch-UNet/issues/78 (2019-10-28).
Root cause (as the thread established it; the reporter confirmed the fix): the binary
masks were loaded as 0/255 images and fed as targets to `nn.BCELoss` after the sigmoid;
BCE needs targets in [0, 1] ("please ensure mask is 0-1, not 0-255"), and with a target
of 255 its minimum is no longer at p = target, so the loss falls without bound (to the
clamp of its log at -100) and pushes every uncertain pixel towards foreground.
Re-created: the repository's U-Net of that time (double 3x3 conv + BatchNorm + ReLU
blocks, max-pool down, bilinear up, skip concatenation, 1x1 head, sigmoid) with
`nn.BCELoss`, SGD lr 0.1 momentum 0.9 weight decay 5e-4 (the train.py defaults),
batch 8; differs from the original: two levels of 16/32 channels instead of four of
64-512; seeded 32x32 grey images of bright discs on noise instead of the car photos;
200 steps.  The harm is read as the Dice of the thresholded sigmoid against the 0/1
masks (reported in the `val_acc` column).
Fix: mask = mask / 255.  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import batched, evaluating, fixed_from_env, generator, split  # noqa: E402

KIND = "failure"
STEPS = 200
HARM_METRIC = "val_acc"  # the validation Dice
SIDE = 32


def double_conv(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(),
                         nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU())


class UNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.inc = double_conv(1, 16)
        self.down = double_conv(16, 32)
        self.up = double_conv(48, 16)
        self.outc = nn.Conv2d(16, 1, 1)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.down(F.max_pool2d(x1, 2))
        x3 = F.interpolate(x2, scale_factor=2, mode="bilinear", align_corners=True)
        return torch.sigmoid(self.outc(self.up(torch.cat([x1, x3], 1))))


def discs(seed: int, n: int):
    """Images of 1-3 bright discs on noise and their masks stored as 0/255 (a PNG mask)."""
    g = generator(seed)
    yy, xx = torch.meshgrid(torch.arange(SIDE), torch.arange(SIDE), indexing="ij")
    masks = torch.zeros(n, 1, SIDE, SIDE)
    for _ in range(3):
        cx, cy = (torch.rand(2, n, 1, 1, generator=g) * SIDE)
        r = 3 + 5 * torch.rand(n, 1, 1, generator=g)
        keep = (torch.rand(n, 1, 1, generator=g) < 0.7).float()
        disc = (((xx - cx) ** 2 + (yy - cy) ** 2) < r ** 2).float() * keep
        masks = torch.maximum(masks, disc.unsqueeze(1))
    images = 0.6 * masks + 0.3 * torch.randn(n, 1, SIDE, SIDE, generator=g)
    return images, masks * 255


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    images, masks = discs(seed, 400)
    # BUG: true_masks = masks (0/255 as read from the file)
    # FIX: true_masks = masks / 255
    targets = masks / 255 if fixed else masks
    Xt, yt, Xv, yv = split(images, targets, 80)
    criterion = nn.BCELoss()

    def step(model, optimizer, batch):
        imgs, true_masks = batch
        loss = criterion(model(imgs), true_masks)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=UNet,
                optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9,
                                                    weight_decay=5e-4),
                batches=batched(Xt, yt, 8), step=step, loss=criterion,
                val_batches=batched(Xv, yv, 40), steps=STEPS, seed=seed)


@evaluating
def dice(model, batches) -> float:
    inter = total = 0.0
    for x, y in batches:
        pred = (model(x) > 0.5).float()
        truth = (y > 0).float()  # the 0/1 mask, whichever scale the program stored
        inter += float((pred * truth).sum())
        total += float(pred.sum() + truth.sum())
    return 2 * inter / total if total else float("nan")


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_acc": dice(model, val_batches)}
