"""A video-diffusion fine-tuning loop never calls optimizer.step(): the loss never moves.

Source: https://github.com/tedlasai/learn2refocus/issues/5 (2026-02-24); the author replied
"Thank you! I have updated the code." (2026-03-26).
Root cause (as the issue established it): in training/svd_runner.py the step ran
`accelerator.backward(loss)`, then `lr_scheduler.step()` and `optimizer.zero_grad()`, with
no `optimizer.step()` between them, so every gradient was computed and thrown away and
the UNet stayed at its pretrained weights ("the weight never gets updated").
Re-created: the loop's shape -- a denoiser trained with a noise-level-weighted MSE on
noisy targets conditioned on an input image, AdamW, a learning-rate scheduler stepped
after every batch, backward / (step) / scheduler / zero_grad in that order;
differs from the original: Stable Video Diffusion's UNet on focal stacks replaced by a
4-layer conv denoiser on seeded 3x16x16 image pairs (the target is a fixed blur of the
conditioning image, standing in for a refocused frame), a log-normal noise level as in
EDM training, AdamW lr 1e-3 with a 20-step linear warm-up (values ours), batch 16,
150 steps, no accelerate.
Fix: optimizer.step() after the backward pass.  Run fixed: FAILURELAB_FIX=1.
"""
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import batched, evaluating, fixed_from_env, generator  # noqa: E402

KIND = "failure"
STEPS = 150
HARM_METRIC = "val_loss"
SIDE = 16


def pairs(seed: int, n: int):
    """Seeded (conditioning image, target frame): the target is a blurred copy."""
    g = generator(seed)
    x = F.avg_pool2d(torch.rand(n, 3, SIDE, SIDE, generator=g), 3, 1, 1)
    x = (x - x.mean()) / x.std()
    kernel = torch.ones(3, 1, 5, 5) / 25
    y = F.conv2d(F.pad(x, (2, 2, 2, 2), mode="replicate"), kernel, groups=3)
    return x, y


class Denoiser(nn.Module):
    """Predicts the clean target from (noisy target, conditioning image, noise level)."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(7, 32, 3, padding=1), nn.SiLU(),
                                 nn.Conv2d(32, 32, 3, padding=1), nn.SiLU(),
                                 nn.Conv2d(32, 32, 3, padding=1), nn.SiLU(),
                                 nn.Conv2d(32, 3, 3, padding=1))

    def forward(self, noisy, cond, sigma):
        level = sigma.log().expand(-1, 1, SIDE, SIDE)
        c_in = 1 / (sigma ** 2 + 1).sqrt()
        return self.net(torch.cat([noisy * c_in, cond, level], 1))


def denoising_loss(model, cond, target, g=None):
    sigma = (torch.randn(len(target), 1, 1, 1, generator=g) * 1.2 - 1.2).exp()
    noisy = target + sigma * torch.randn(target.shape, generator=g)
    weight = (sigma ** 2 + 1) / sigma ** 2
    weight = weight / weight.mean()
    return (weight * (model(noisy, cond, sigma) - target) ** 2).mean()


def make_optimizer(unet):
    optimizer = torch.optim.AdamW(unet.parameters(), lr=1e-3, weight_decay=1e-2)
    lr_scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer,
                                                     lambda s: min(1.0, (s + 1) / 20))
    return optimizer, lr_scheduler  # the harness steps lr_scheduler after each step


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    x, y = pairs(seed, 1600)

    def step(unet, optimizer, batch):
        cond, target = batch
        loss = denoising_loss(unet, cond, target)
        loss.backward()
        if fixed:
            optimizer.step()  # FIX: apply the gradients
        # BUG: no optimizer.step(): lr_scheduler.step() and zero_grad() follow backward
        optimizer.zero_grad()
        return loss

    return dict(model=Denoiser, optimizer=make_optimizer,
                batches=batched(x[:1280], y[:1280], 16), step=step, loss=None,
                val_batches=batched(x[1280:], y[1280:], 64), steps=STEPS, seed=seed)


@evaluating
def measure(unet, val_batches, fixed: bool) -> dict:
    """Held-out denoising loss with a fixed noise draw (the same for every run)."""
    g = generator(1234)
    losses = [float(denoising_loss(unet, c, t, g)) for c, t in val_batches]
    return {"val_loss": sum(losses) / len(losses)}
