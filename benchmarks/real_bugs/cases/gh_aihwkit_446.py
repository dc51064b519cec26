"""A one-layer example's loss falls for four steps, then climbs back: zero_grad() is missing.

Source: https://github.com/IBM/aihwkit/issues/446 (2022-11-17), confirmed by a maintainer
the same day ("you are right") and fixed in the examples.
Root cause (as the issue established it): examples/01_simple_layer.py (and 02) run
`pred = model(x); loss = mse_loss(pred, y); loss.backward(); opt.step()` for 100 epochs
with no `opt.zero_grad()`, so every step applies the sum of all past gradients; the
printed loss goes 1.03, 0.82, 0.47, 0.20, 0.06, then 0.09, 0.28, 0.53, 0.75, 0.87.
Adding `opt.zero_grad()` makes it fall steadily.
Re-created: a single linear layer 4 -> 2 with bias, two samples of 4 inputs in [0, 0.5]
and 2 targets in [0.3, 1] (the example's scale), MSE, SGD lr 0.1, full batch, 100 steps;
differs from the original: the AnalogLinear tile (a simulated resistive device) and
AnalogSGD are replaced by nn.Linear and torch.optim.SGD -- the bug is in the loop, not in
the device; the two samples are drawn from the seed instead of the example's constants.
Fix: opt.zero_grad() before backward().  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn.functional import mse_loss

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import fixed_from_env, generator  # noqa: E402

KIND = "failure"
STEPS = 100
HARM_METRIC = "train_loss"


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    g = generator(seed)
    x = 0.1 + 0.3 * torch.rand(2, 4, generator=g)
    y = 0.3 + 0.7 * torch.rand(2, 2, generator=g)

    def step(model, opt, batch):
        inputs, targets = batch
        if fixed:
            opt.zero_grad()  # FIX: clear the previous step's gradient
        # BUG: no opt.zero_grad(): each step applies the sum of all past gradients
        pred = model(inputs)
        loss = mse_loss(pred, targets)
        loss.backward()
        opt.step()
        return loss

    return dict(model=lambda: nn.Linear(4, 2, bias=True),
                optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=0.1),
                batches=[(x, y)], step=step, loss=mse_loss,
                val_batches=None, steps=STEPS, seed=seed)
