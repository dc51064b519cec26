"""A per-epoch cosine learning-rate schedule is stepped after every batch of a segmentation U-Net.

Source: https://github.com/ivadomed/ivadomed/pull/55 (2019-10-02, merged 2019-10-03),
commit 71bba65 ("Scheduler was incorrectly stepped in the batch loop instead of in the
epoch loop, causing the LR to be updated after each batch instead of after each epoch").
Root cause (as the fix established it): cmd_train built
`CosineAnnealingLR(optimizer, num_epochs)` -- one cosine half-period over the 100 epochs
of config.json -- and called `scheduler.step()` right after `optimizer.step()` inside the
batch loop, so the rate ran through a full half-period every 100 batches (falling to 0,
then rising again), instead of decaying slowly over training. The fix moves the call to
the end of the epoch.
Re-created: a U-Net with batch norm (momentum 0.1) and dropout 0.3, sigmoid output, the
loss `- dice_loss(preds, gt)`, Adam lr 1e-3, batch 18, CosineAnnealingLR(T_max = 100
epochs); validation Dice;
differs from the original: spinal-cord MRI slices replaced by seeded 1x32x32 images with
one elongated bright structure (its mask the target) in noise and a smooth background,
a two-level U-Net with 8/16/32 channels instead of the full-depth one, 360 training
images (20 batches an epoch), 300 steps (15 epochs).
Fix: scheduler.step() once per epoch.  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import batched, evaluating, fixed_from_env, generator  # noqa: E402

KIND = "failure"
STEPS = 300
HARM_METRIC = "val_acc"
SIDE, NUM_EPOCHS, BATCH, N_TRAIN = 32, 100, 18, 360


def slices(seed: int, n: int):
    """Seeded images with one tilted bright band (the 'cord') and its mask."""
    g = generator(seed)
    coords = torch.linspace(-1, 1, SIDE)
    yy, xx = torch.meshgrid(coords, coords, indexing="ij")
    centre = 0.5 * (torch.rand(n, 1, 1, generator=g) - 0.5)
    tilt = 0.6 * (torch.rand(n, 1, 1, generator=g) - 0.5)
    width = 0.10 + 0.08 * torch.rand(n, 1, 1, generator=g)
    mask = ((xx - centre - tilt * yy).abs() < width).float()
    background = F.avg_pool2d(torch.rand(n, 1, SIDE, SIDE, generator=g), 9, 1, 4)
    image = 0.6 * mask.unsqueeze(1) + background + 0.35 * torch.randn(n, 1, SIDE, SIDE,
                                                                      generator=g)
    return image, mask.unsqueeze(1)


def conv_block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1),
                         nn.BatchNorm2d(cout, momentum=0.1), nn.ReLU(), nn.Dropout2d(0.3),
                         nn.Conv2d(cout, cout, 3, padding=1),
                         nn.BatchNorm2d(cout, momentum=0.1), nn.ReLU())


class Unet(nn.Module):
    def __init__(self):
        super().__init__()
        self.down1, self.down2 = conv_block(1, 8), conv_block(8, 16)
        self.bottom = conv_block(16, 32)
        self.up2, self.up1 = conv_block(32 + 16, 16), conv_block(16 + 8, 8)
        self.out = nn.Conv2d(8, 1, 1)

    def forward(self, x):
        d1 = self.down1(x)
        d2 = self.down2(F.max_pool2d(d1, 2))
        b = self.bottom(F.max_pool2d(d2, 2))
        u2 = self.up2(torch.cat([F.interpolate(b, scale_factor=2), d2], 1))
        u1 = self.up1(torch.cat([F.interpolate(u2, scale_factor=2), d1], 1))
        return torch.sigmoid(self.out(u1))


def dice_loss(input, target):
    smooth = 1.0
    iflat, tflat = input.view(-1), target.view(-1)
    intersection = (iflat * tflat).sum()
    return (2.0 * intersection + smooth) / (iflat.sum() + tflat.sum() + smooth)


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    x, y = slices(seed, N_TRAIN + 180)
    state = {"num_steps": 0}

    def step(model, optimizer, batch):
        if "scheduler" not in state:  # made with the optimizer in cmd_train
            state["scheduler"] = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer,
                                                                            NUM_EPOCHS)
        scheduler = state["scheduler"]
        input_samples, gt_samples = batch
        preds = model(input_samples)
        loss = - dice_loss(preds, gt_samples)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        state["num_steps"] += 1
        if fixed:
            if state["num_steps"] % (N_TRAIN // BATCH) == 0:
                scheduler.step()  # FIX: once per epoch, after the batch loop
        else:
            scheduler.step()  # BUG: stepped after every batch
        return loss

    return dict(model=Unet, optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-3),
                batches=batched(x[:N_TRAIN], y[:N_TRAIN], BATCH), step=step, loss=None,
                val_batches=batched(x[N_TRAIN:], y[N_TRAIN:], BATCH), steps=STEPS, seed=seed)


@evaluating
def measure(model, val_batches, fixed: bool) -> dict:
    """Validation Dice of the thresholded prediction (in the val_acc column)."""
    scores = [float(dice_loss((model(x) > 0.5).float(), t)) for x, t in val_batches]
    return {"val_acc": sum(scores) / len(scores)}
