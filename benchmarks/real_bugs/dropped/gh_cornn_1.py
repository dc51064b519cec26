"""Control: model.train() is never called again after model.eval() -- and it does not matter.

Source: https://github.com/tk-rusch/coRNN/issues/1 (2020-12-02).
What the thread established: the adding-task script calls model.eval() for testing and
never switches back, but the coRNN has no dropout and no batch norm, so eval and train
mode compute the same thing; "this does not affect the outcome".  Healthy training.
Re-created: a coupled-oscillator RNN cell (hz += dt (tanh(W hy + W_z hz + V x) - gamma hy
- eps hz); hy += dt hz) on the adding problem, MSE, Adam, with an eval pass every 50 steps
that leaves the model in eval mode;
differs from the original: sequence length 30 instead of 500, hidden 64, lr 1e-2,
batch 50, 300 steps; dt 0.034, gamma 2.7, eps 4.7 as in the paper's adding-task setting.
(A first version used dt 0.5, which made the explicit scheme unstable -- val MSE 1e6 --
so it re-created an unhealthy run; corrected before the reported diagnosis.)
Fix: none needed; FAILURELAB_FIX=1 adds the model.train() call, which changes nothing.
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import fixed_from_env, generator, mean_loss  # noqa: E402

KIND = "control"
STEPS = 300
HARM_METRIC = "val_loss"
T, HID, DT, GAMMA, EPS = 30, 64, 0.034, 2.7, 4.7


class CoRNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.i2h = nn.Linear(2 + 2 * HID, HID)
        self.readout = nn.Linear(HID, 1)

    def forward(self, x):  # x (B, T, 2)
        hy = hz = x.new_zeros(x.shape[0], HID)
        for t in range(x.shape[1]):
            hz = hz + DT * (torch.tanh(self.i2h(torch.cat([x[:, t], hz, hy], 1)))
                            - GAMMA * hy - EPS * hz)
            hy = hy + DT * hz
        return self.readout(hy)


def adding(g, n):
    values = torch.rand(n, T, generator=g)
    marks = torch.zeros(n, T)
    first = torch.randint(T // 2, (n,), generator=g)
    second = torch.randint(T // 2, T, (n,), generator=g)
    marks[torch.arange(n), first] = 1
    marks[torch.arange(n), second] = 1
    return torch.stack([values, marks], 2), (values * marks).sum(1, keepdim=True)


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    g = generator(seed)
    batches = [adding(g, 50) for _ in range(60)]
    val = [adding(g, 500)]
    objective = nn.MSELoss()
    counter = {"i": 0}

    def step(model, optimizer, batch):
        counter["i"] += 1
        if counter["i"] % 50 == 0:  # the script's periodic test pass
            model.eval()
            with torch.no_grad():
                objective(model(val[0][0]), val[0][1])
            if fixed:
                model.train()  # "FIX": switch back (no dropout/batch norm: no effect)
        x, y = batch
        optimizer.zero_grad()
        loss = objective(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=CoRNN, optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-2),
                batches=batches, step=step, loss=objective, val_batches=val,
                steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_loss": mean_loss(model, val_batches, nn.functional.mse_loss)}
