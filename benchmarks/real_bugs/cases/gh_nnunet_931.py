"""Control: nnU-Net's validation loss is lower than its training loss on a small custom dataset.

Source: https://github.com/MIC-DKFZ/nnUNet/issues/931 (2022-01-28, answered by the maintainer
the same day, closed); the mechanism as the maintainer gave it in
https://github.com/MIC-DKFZ/nnUNet/issues/114 (2019-12-30).
What the thread established: nothing is wrong.  The reporter trained nnU-Net (5-fold
cross-validation, default settings) on a small custom dataset and saw progress.png's
validation loss below the training loss; the maintainer answered "this is normal.  Some
datasets, especially small ones do this sometimes ... Let the training finish".  In #114
he explains the gap: the training loss is computed on samples that receive data
augmentation, the validation loss on samples that do not.
Healthy training: there is no fix.
Re-created: nnU-Net's 2D recipe -- a U-Net with strided-convolution downsampling,
InstanceNorm and LeakyReLU(0.01), Dice + cross-entropy loss (soft Dice over the batch,
background excluded, smooth 1e-5, entering as -Dice), SGD lr 0.01, momentum 0.99,
Nesterov, weight decay 3e-5, poly learning-rate decay (exponent 0.9), gradient norm clipped
at 12, batches drawn at random from the training cases with augmentation (mirroring,
90-degree rotations, brightness, gamma, simulated low resolution, Gaussian noise) on the
training batches only, z-scored images, one fold's 80/20 split;
differs from the original: a custom 3D/2D medical dataset replaced by 50 seeded 32x32
single-channel images of bright ellipses on a textured background (40 training, 10
validation); a two-level U-Net of 16/32 channels instead of nnU-Net's planned depth;
no deep supervision; whole images instead of patches; batch 12; 200 steps with the poly
decay spread over them instead of 1000 epochs of 250 iterations.
Fix: none (a healthy report).  FAILURELAB_FIX changes nothing.
"""
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import batched, fixed_from_env, generator, mean_loss  # noqa: E402

KIND = "control"
STEPS = 200
BATCH = 12
SIDE = 32
HARM_METRIC = "val_loss"


def cases(seed: int, n: int):
    """n z-scored images with 1-3 bright ellipses each, and their foreground masks."""
    g = generator(seed)
    yy, xx = torch.meshgrid(torch.arange(SIDE).float(), torch.arange(SIDE).float(),
                            indexing="ij")
    texture = F.avg_pool2d(torch.randn(n, 1, SIDE, SIDE, generator=g), 5, 1, 2) * 2.0
    masks = torch.zeros(n, SIDE, SIDE, dtype=torch.long)
    for i in range(n):
        for _ in range(int(torch.randint(1, 4, (1,), generator=g))):
            cy, cx = (torch.rand(2, generator=g) * (SIDE - 10) + 5).tolist()
            ry, rx = (torch.rand(2, generator=g) * 4 + 2.5).tolist()
            masks[i][((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1] = 1
    x = texture + 1.2 * masks[:, None].float() + 0.4 * torch.randn(n, 1, SIDE, SIDE, generator=g)
    x = (x - x.mean(dim=(1, 2, 3), keepdim=True)) / x.std(dim=(1, 2, 3), keepdim=True)
    return x, masks


def augment(x, y, g):
    """nnU-Net-style spatial and intensity augmentation of one training batch."""
    k = int(torch.randint(4, (1,), generator=g))
    x, y = torch.rot90(x, k, (2, 3)), torch.rot90(y, k, (1, 2))
    if torch.rand(1, generator=g) < 0.5:
        x, y = x.flip(3), y.flip(2)
    if torch.rand(1, generator=g) < 0.5:
        x, y = x.flip(2), y.flip(1)
    n = len(x)
    x = x * (0.7 + 0.6 * torch.rand(n, 1, 1, 1, generator=g))          # brightness
    lo = x.amin(dim=(1, 2, 3), keepdim=True)
    span = x.amax(dim=(1, 2, 3), keepdim=True) - lo
    gamma = 0.7 + 0.8 * torch.rand(n, 1, 1, 1, generator=g)
    x = ((x - lo) / span) ** gamma * span + lo                          # gamma
    if torch.rand(1, generator=g) < 0.5:                                # low resolution
        x = F.interpolate(F.avg_pool2d(x, 2), scale_factor=2, mode="bilinear")
    x = x + 0.6 * torch.rand(n, 1, 1, 1, generator=g) * torch.randn(x.shape, generator=g)
    return x, y


def block(c_in, c_out, stride=1):
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, stride, 1), nn.InstanceNorm2d(c_out, affine=True),
                         nn.LeakyReLU(0.01), nn.Conv2d(c_out, c_out, 3, 1, 1),
                         nn.InstanceNorm2d(c_out, affine=True), nn.LeakyReLU(0.01))


class UNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = block(1, 16)
        self.bottom = block(16, 32, stride=2)
        self.up = nn.ConvTranspose2d(32, 16, 2, 2, bias=False)
        self.dec = block(32, 16)
        self.seg = nn.Conv2d(16, 2, 1, bias=False)

    def forward(self, x):
        skip = self.enc(x)
        return self.seg(self.dec(torch.cat([self.up(self.bottom(skip)), skip], 1)))


def dc_and_ce_loss(output, target):
    """nnU-Net's DC_and_CE_loss: cross-entropy plus (-soft Dice), batch Dice, no background."""
    ce = F.cross_entropy(output, target)
    p = output.softmax(1)[:, 1:]
    onehot = F.one_hot(target, output.shape[1]).permute(0, 3, 1, 2)[:, 1:].float()
    tp = (p * onehot).sum(dim=(0, 2, 3))
    fp = (p * (1 - onehot)).sum(dim=(0, 2, 3))
    fn = ((1 - p) * onehot).sum(dim=(0, 2, 3))
    dc = (2 * tp + 1e-5) / (2 * tp + fp + fn + 1e-5)
    return ce - dc.mean()


def make_optimizer(model):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.99, nesterov=True,
                                weight_decay=3e-5)
    poly = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda i: (1 - i / STEPS) ** 0.9)
    return optimizer, poly


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed  # a control: nothing to fix
    x, y = cases(seed, 50)
    xt, yt, xv, yv = x[:40], y[:40], x[40:], y[40:]
    g = generator(seed + 1)
    batches = []
    for _ in range(STEPS):  # random training cases per iteration, augmented
        pick = torch.randint(len(xt), (BATCH,), generator=g)
        batches.append(augment(xt[pick], yt[pick], g))

    def step(model, optimizer, batch):
        data, target = batch
        optimizer.zero_grad()
        output = model(data)
        loss = dc_and_ce_loss(output, target)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 12)
        optimizer.step()
        return loss

    return dict(model=UNet, optimizer=make_optimizer, batches=batches, step=step,
                loss=dc_and_ce_loss, val_batches=batched(xv, yv, 5), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    """The validation loss progress.png plots: the same loss, unaugmented validation cases."""
    return {"val_loss": mean_loss(model, val_batches, dc_and_ce_loss)}
