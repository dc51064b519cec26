"""A small MLP cannot learn y = x^3 for x = 1..3999: the loss stays astronomically high.

Source: https://discuss.pytorch.org/t/neural-network-could-not-learn-on-this-type-of-data-why/96648
(post 5, 2020-09). We could read the answer (post 5), not the question's own code.
Root cause (as the answer established it): the raw data -- inputs 1..3999 and targets up
to 6.4e10 -- are far from the scale the network's initial weights and Adam's steps of
about 1e-3 can reach; the answer standardises the input "(which is usually done anyway)"
and the target (mean/std), trains on the normalised target and unnormalises the
predictions afterwards, and the same network then learns the data.
Re-created: the answer's network (Linear(1, 50) -> ReLU -> Linear(50, 1)), Adam lr 1e-3,
MSELoss, full-batch steps on the answer's dataset (x = 1..3999, y = x^3);
differs from the original: every tenth point held out for validation; 300 steps instead
of 1000 epochs; the yardstick is the validation MSE divided by the target's variance
(the fraction of variance left unexplained, the same number in raw and in standardised
units), because the raw and the standardised losses are not comparable.
Fix: standardise input and target with their mean and std.  Run fixed: FAILURELAB_FIX=1
or parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import fixed_from_env, mean_loss  # noqa: E402

KIND = "failure"
STEPS = 300
HARM_METRIC = "val_loss"


class Network(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(1, 50)
        self.fc2 = nn.Linear(50, 1)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def data():
    x = torch.arange(1, 4000).float().unsqueeze(1)
    return x, x ** 3


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    x, y = data()
    if fixed:  # FIX: standardise the input and the target
        x = (x - x.mean()) / x.std()
        y = (y - y.mean()) / y.std()
    # BUG: the raw input (1..3999) and the raw target (up to 6.4e10) go into the network
    val = torch.arange(len(x)) % 10 == 0
    criterion = nn.MSELoss()

    def step(model, optimizer, batch):
        inputs, target = batch
        optimizer.zero_grad()
        out = model(inputs)
        loss = criterion(out, target)
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=Network, optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-3),
                batches=[(x[~val], y[~val])], step=step, loss=criterion,
                val_batches=[(x[val], y[val])], steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    """Validation MSE over the target's variance (unit-free: raw and standardised agree)."""
    target_var = float(data()[1].var())
    mse = mean_loss(model, val_batches, F.mse_loss)
    return {"val_loss": mse if fixed else mse / target_var}
