"""An SRGAN generator's StepLR is stepped every batch, so its learning rate is ~0 early.

Source: https://github.com/Lornatang/SRGAN-PyTorch/issues/1 (2020-12-30).
Root cause (as the issue established it and the author confirmed): the scheduler was built
with step_size=epochs // 2 and gamma=0.1 -- a per-epoch schedule -- but
`scheduler.step()` was called at every training step, so the learning rate fell tenfold
every epochs // 2 batches and "quickly becomes zero"; the model did not train until the
call was moved to the end of the epoch.
Re-created: a small SRResNet-style generator (conv, 2 residual blocks, PixelShuffle x2),
MSE pre-training, Adam lr 1e-3, StepLR(step_size=epochs // 2, gamma=0.1) with epochs 20;
differs from the original: seeded 16x16 -> 32x32 smooth images instead of ImageNet crops,
2 residual blocks of 16 channels and 3x3 kernels instead of 16 blocks of 64 with
9x9 head/tail, lr 1e-3 instead of 1e-4 so that 300 steps (20 epochs of
15 batches) show learning, generator only (the bug is in the schedule).
Fix: count the schedule in batches (step_size = epochs // 2 x batches per epoch), which is
what stepping once per epoch does.  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import batched, fixed_from_env, generator, mean_loss, split  # noqa: E402

KIND = "failure"
EPOCHS = 20
BATCHES_PER_EPOCH = 15
STEPS = EPOCHS * BATCHES_PER_EPOCH
HARM_METRIC = "val_loss"


class ResidualBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x):
        return x + self.conv2(F.leaky_relu(self.conv1(x), 0.25))


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Conv2d(1, 16, 3, padding=1)
        self.blocks = nn.Sequential(ResidualBlock(16), ResidualBlock(16))
        self.up = nn.Sequential(nn.Conv2d(16, 64, 3, padding=1), nn.PixelShuffle(2), nn.PReLU())
        self.tail = nn.Conv2d(16, 1, 3, padding=1)

    def forward(self, lr):
        x = self.head(lr)
        return self.tail(self.up(x + self.blocks(x)))


def images(seed: int, n: int):
    g = generator(seed)
    hr = F.interpolate(torch.rand(n, 1, 8, 8, generator=g), size=32, mode="bilinear",
                       align_corners=False)
    return F.avg_pool2d(hr, 2), hr


def make_optimizer(model, fixed: bool):
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    if fixed:  # FIX: the per-epoch schedule counted in batches
        scheduler = torch.optim.lr_scheduler.StepLR(
            optimizer, step_size=(EPOCHS // 2) * BATCHES_PER_EPOCH, gamma=0.1)
    else:  # BUG: a per-epoch step_size, stepped after every batch
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=EPOCHS // 2, gamma=0.1)
    return optimizer, scheduler  # the loop calls scheduler.step() after every batch


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = images(seed, BATCHES_PER_EPOCH * 16 + 64)
    Xt, yt, Xv, yv = split(X, y, 64)
    criterion = nn.MSELoss()

    def step(model, optimizer, batch):
        lr_img, hr_img = batch
        optimizer.zero_grad()
        loss = criterion(model(lr_img), hr_img)
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=Generator, optimizer=lambda m: make_optimizer(m, fixed),
                batches=batched(Xt, yt, 16), step=step, loss=criterion,
                val_batches=batched(Xv, yv, 64), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_loss": mean_loss(model, val_batches, nn.functional.mse_loss)}
