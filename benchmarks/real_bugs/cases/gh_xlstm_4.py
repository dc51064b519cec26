"""A sequence regressor accumulates MSE between (10, 1) predictions and a (1, 1) target.

Source: https://github.com/andrewgcodes/xlstm/issues/4 (2024-06-28).
Root cause (as the issue established it): in the example's training loop `y_pred` is
(10, 1) and `y_true` is (1, 1); `criterion(y_pred, y_true)` broadcasts the single target
against all ten outputs (PyTorch warns "Using a target size (torch.Size([1, 1])) that is
different to the input size (torch.Size([10, 1]))"); the proposed fix compares
`y_pred[0]` with `y_true[0]`, the one prediction that belongs to the target.
Re-created: an LSTM over 10 steps of 1-d input, one regression output per sequence,
MSELoss accumulated per sample, Adam lr 1e-2;
differs from the original: nn.LSTM instead of the repository's mLSTM cell (the bug is in
the loss call), a seeded sine-plus-noise task (predict the next value), 4 sequences a
step, 300 steps.
Fix: `criterion(y_pred[-1:], y_true)` (the prediction for the target's position).
Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import fixed_from_env, generator, mean_loss, split  # noqa: E402

KIND = "failure"
STEPS = 300
HARM_METRIC = "val_loss"
SEQ = 10


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(1, 32)
        self.out = nn.Linear(32, 1)

    def forward(self, seq):  # seq (SEQ, 1) -> one prediction per position (SEQ, 1)
        h, _ = self.lstm(seq.unsqueeze(1))
        return self.out(h[:, 0])


def data(seed: int, n: int):
    g = generator(seed)
    phase = torch.rand(n, 1, generator=g) * 6.28
    freq = 0.3 + 0.5 * torch.rand(n, 1, generator=g)
    t = torch.arange(SEQ + 1).float()
    s = torch.sin(freq * t + phase) + 0.05 * torch.randn(n, SEQ + 1, generator=g)
    return s[:, :SEQ].unsqueeze(-1), s[:, SEQ:].unsqueeze(-1)  # (n, SEQ, 1), (n, 1, 1)


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = data(seed, 1300)
    Xt, yt, Xv, yv = split(X, y, 100)
    criterion = nn.MSELoss()
    batches = [(Xt[i:i + 4], yt[i:i + 4]) for i in range(0, len(Xt), 4)]

    def step(model, optimizer, batch):
        optimizer.zero_grad()
        loss = 0
        for x, y_true in zip(*batch, strict=True):
            y_pred = model(x)  # (10, 1)
            if fixed:
                loss += criterion(y_pred[-1:], y_true)  # FIX: the prediction for the target
            else:
                loss += criterion(y_pred, y_true)  # BUG: (10, 1) vs (1, 1) broadcasts
        loss.backward()
        optimizer.step()
        return loss / len(batch[0])

    return dict(model=Net, optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-2),
                batches=batches, step=step,
                loss=lambda out, y: criterion(out[-1:], y), val_batches=list(zip(Xv, yv, strict=True)),
                steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_loss": mean_loss(model, val_batches,
                                  lambda out, y: nn.functional.mse_loss(out[-1:], y))}
