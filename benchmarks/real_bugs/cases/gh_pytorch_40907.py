"""The PyTorch MNIST example under torch.cuda.amp stops learning once gradient clipping is added.

Source: https://github.com/pytorch/pytorch/issues/40907 (2020-07-02, closed).
Root cause: the reporter added `clip_grad_norm_(model.parameters(), 12)` to the MNIST
example trained with autocast and a GradScaler and saw that "the loss does not decrease
anymore", asking how clipping should be combined with amp.  The part of the thread we
could read shows the question and the example's model, not the answer; the cause and
the fix are the ones PyTorch's AMP notes give for exactly this ("Working with unscaled
gradients: gradient clipping"): after `scaler.scale(loss).backward()` the gradients are
multiplied by the scale (65536 at the start), so clipping them at 12 cuts them to
12/65536 of their size once scaler.step() unscales them; `scaler.unscale_(optimizer)`
belongs before the clip.
Re-created: the MNIST example's network (conv 3x3 -> ReLU -> conv 3x3 -> ReLU -> max-pool
2 -> Dropout2d 0.25 -> fc 128 -> ReLU -> Dropout2d 0.5 -> fc 10 -> log_softmax),
nll_loss, Adadelta lr 1.0, batch 64, inputs normalised with (0.1307, 0.3081), float16
autocast with a GradScaler (init scale 65536), clip_grad_norm_ at 12 between backward()
and scaler.step() -- the only place a clip can act on this loop's gradients;
differs from the original: MNIST replaced by seeded 14x14 stroke images (6000 train,
1000 test); convolutions of 8 and 16 channels instead of 32 and 64 (fc 400 -> 128) so
a float16 run fits in seconds on a CPU, where autocast and the GradScaler run on the CPU
device; 150 steps instead of 14 epochs, so the per-epoch StepLR(gamma 0.7) never steps
and is left out.
Fix: scaler.unscale_(optimizer) before clip_grad_norm_.  Run fixed: FAILURELAB_FIX=1 or
parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils import clip_grad_norm_

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import accuracy, batched, fixed_from_env, generator  # noqa: E402

KIND = "failure"
STEPS = 150
HARM_METRIC = "val_acc"
SIDE, CLASSES = 14, 10
MAX_NORM = 12


def mnist_like(seed: int, n: int):
    """Seeded MNIST stand-in in [0, 1], normalised like the example's transform."""
    g = generator(seed)
    strokes = (torch.rand(CLASSES, SIDE * SIDE, generator=g) < 0.2).float()
    y = torch.randint(CLASSES, (n,), generator=g)
    x = (strokes[y] * 0.8 + 0.35 * torch.randn(n, SIDE * SIDE, generator=g)).clamp(0, 1)
    return ((x - 0.1307) / 0.3081).reshape(n, 1, SIDE, SIDE), y


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 1)
        self.conv2 = nn.Conv2d(8, 16, 3, 1)
        self.dropout1 = nn.Dropout2d(0.25)
        self.dropout2 = nn.Dropout2d(0.5)
        self.fc1 = nn.Linear(16 * 5 * 5, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv2(F.relu(self.conv1(x)))), 2)
        x = torch.flatten(self.dropout1(x), 1)
        x = self.dropout2(F.relu(self.fc1(x)))
        return F.log_softmax(self.fc2(x), dim=1)


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    x, y = mnist_like(seed, 7000)
    scaler = torch.amp.GradScaler("cpu")

    def step(model, optimizer, batch):
        data, target = batch
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16):
            output = model(data)
            loss = F.nll_loss(output.float(), target)
        scaler.scale(loss).backward()
        if fixed:
            scaler.unscale_(optimizer)  # FIX: unscale before clipping
        clip_grad_norm_(model.parameters(), MAX_NORM)  # BUG: clips the scaled gradients
        scaler.step(optimizer)
        scaler.update()
        return loss

    return dict(model=Net,
                optimizer=lambda m: torch.optim.Adadelta(m.parameters(), lr=1.0),
                batches=batched(x[:6000], y[:6000], 64), step=step, loss=F.nll_loss,
                val_batches=batched(x[6000:], y[6000:], 500), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_acc": accuracy(model, val_batches)}
