"""Control: "why does masks_pred have negative numbers?" -- they are logits; training is fine.

Source: https://github.com/milesial/Pytorch-UNet/issues/257 (2021-02-02).
What the thread established: nothing is wrong. The reporter saw many negative values in
`masks_pred = net(imgs)` while the batch loss was very low; the maintainer answered that
the network outputs raw, unnormalised logits and the sigmoid/softmax is applied inside
the loss (`nn.BCEWithLogitsLoss` for one class), so negative outputs are background
pixels.  Healthy training: there is no fix.
Re-created: the repository's train.py of that time for one class -- a U-Net (double
3x3 conv + BatchNorm + ReLU blocks, max-pool down, bilinear up, skip concatenation,
1x1 head, no output activation), `nn.BCEWithLogitsLoss`, RMSprop with momentum 0.9 and
weight decay 1e-8, batch 8; differs from the original: two levels of 16/32 channels
instead of four of 64-512; seeded 32x32 grey images of bright discs on noise with 0/1
masks instead of the Carvana photos; lr 1e-4 instead of 1e-5 so that 200 steps from a
seeded init (not a long run) reach a useful Dice.
Fix: none (a healthy report).  FAILURELAB_FIX changes nothing.
"""
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import batched, evaluating, fixed_from_env, generator, split  # noqa: E402

KIND = "control"
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
        return self.outc(self.up(torch.cat([x1, x3], 1)))  # logits: negative = background


def discs(seed: int, n: int):
    """Images of 1-3 bright discs on noise and their 0/1 masks."""
    g = generator(seed)
    yy, xx = torch.meshgrid(torch.arange(SIDE), torch.arange(SIDE), indexing="ij")
    masks = torch.zeros(n, 1, SIDE, SIDE)
    for _ in range(3):
        cx, cy = (torch.rand(2, n, 1, 1, generator=g) * SIDE)
        r = 3 + 5 * torch.rand(n, 1, 1, generator=g)
        keep = (torch.rand(n, 1, 1, generator=g) < 0.7).float()
        disc = (((xx - cx) ** 2 + (yy - cy) ** 2) < r ** 2).float() * keep
        masks = torch.maximum(masks, disc.unsqueeze(1))
    return 0.6 * masks + 0.3 * torch.randn(n, 1, SIDE, SIDE, generator=g), masks


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed  # a control: nothing to fix
    images, masks = discs(seed, 400)
    Xt, yt, Xv, yv = split(images, masks, 80)
    criterion = nn.BCEWithLogitsLoss()

    def step(model, optimizer, batch):
        imgs, true_masks = batch
        masks_pred = model(imgs)
        loss = criterion(masks_pred, true_masks)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=UNet,
                optimizer=lambda m: torch.optim.RMSprop(m.parameters(), lr=1e-4,
                                                        weight_decay=1e-8, momentum=0.9),
                batches=batched(Xt, yt, 8), step=step, loss=criterion,
                val_batches=batched(Xv, yv, 40), steps=STEPS, seed=seed)


@evaluating
def dice(model, batches) -> float:
    inter = total = 0.0
    for x, y in batches:
        pred = (torch.sigmoid(model(x)) > 0.5).float()
        inter += float((pred * y).sum())
        total += float(pred.sum() + y.sum())
    return 2 * inter / total if total else float("nan")


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_acc": dice(model, val_batches)}
