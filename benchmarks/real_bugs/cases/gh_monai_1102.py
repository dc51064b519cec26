"""A segmentation dataset rotates each image and its mask by different random angles.

Source: https://github.com/Project-MONAI/MONAI/issues/1102 (2020-10-13).
Root cause (as the issue established it): `ArrayDataset(img=..., img_transform=t,
seg=..., seg_transform=t)` with a random rotation (`RandRotate(range_x=90, prob=1.0)`)
draws the rotation separately for the image and for the segmentation, so the pair
that reaches the network is rotated by different angles and the mask no longer lies on
its object; the pair must share one random draw (one transform applied to both, or
the same random state).
Re-created: a 2-level U-Net-style network (16/32 channels, BatchNorm, skip
concatenation) trained with a soft Dice loss on the sigmoid (the report's tutorial
uses MONAI's DiceLoss), Adam lr 1e-3, batch 10; differs from the original: seeded 2-D
32x32 images of bright ellipses instead of 3-D NIfTI volumes, the random rotation is a
multiple of 90 degrees (exact on a pixel grid) drawn once per training sample when the
data are built, 200 steps; validation pairs are not augmented, as in the tutorial.
Fix: draw the rotation once per pair and apply it to both.  Run fixed:
FAILURELAB_FIX=1 or parts(fixed=True).
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


def block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(),
                         nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU())


class SmallUNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = block(1, 16)
        self.mid = block(16, 32)
        self.dec = block(48, 16)
        self.out = nn.Conv2d(16, 1, 1)

    def forward(self, x):
        e = self.enc(x)
        m = F.interpolate(self.mid(F.max_pool2d(e, 2)), scale_factor=2, mode="nearest")
        return self.out(self.dec(torch.cat([e, m], 1)))


def ellipses(seed: int, n: int):
    """One off-centre ellipse per image (so that a rotation moves it) and its 0/1 mask."""
    g = generator(seed)
    yy, xx = torch.meshgrid(torch.arange(SIDE).float(), torch.arange(SIDE).float(),
                            indexing="ij")
    cx, cy = 4 + 24 * torch.rand(2, n, 1, 1, generator=g)
    a, b = 3 + 5 * torch.rand(2, n, 1, 1, generator=g)
    masks = ((((xx - cx) / a) ** 2 + ((yy - cy) / b) ** 2) < 1).float().unsqueeze(1)
    return 0.7 * masks + 0.3 * torch.randn(n, 1, SIDE, SIDE, generator=g), masks


def rotate(x, k):
    return torch.stack([torch.rot90(xi, int(ki), dims=(1, 2)) for xi, ki in
                        zip(x, k, strict=True)])


def soft_dice_loss(logits, target):
    p = torch.sigmoid(logits)
    inter = (p * target).sum((1, 2, 3))
    return (1 - (2 * inter + 1e-5) / (p.sum((1, 2, 3)) + target.sum((1, 2, 3)) + 1e-5)).mean()


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    images, masks = ellipses(seed, 500)
    Xt, yt, Xv, yv = split(images, masks, 100)
    g = generator(seed + 1)
    k_image = torch.randint(4, (len(Xt),), generator=g)
    k_mask = torch.randint(4, (len(Xt),), generator=g)
    # BUG: img_transform and seg_transform draw their own rotation
    # FIX: one draw per pair, applied to both
    Xt, yt = rotate(Xt, k_image), rotate(yt, k_image if fixed else k_mask)

    def step(model, optimizer, batch):
        inputs, labels = batch
        optimizer.zero_grad()
        loss = soft_dice_loss(model(inputs), labels)
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=SmallUNet,
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-3),
                batches=batched(Xt, yt, 10), step=step, loss=soft_dice_loss,
                val_batches=batched(Xv, yv, 50), steps=STEPS, seed=seed)


@evaluating
def dice(model, batches) -> float:
    inter = total = 0.0
    for x, y in batches:
        pred = (model(x) > 0).float()
        inter += float((pred * y).sum())
        total += float(pred.sum() + y.sum())
    return 2 * inter / total if total else float("nan")


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_acc": dice(model, val_batches)}
