"""An LSTM fitted to an AR(20) series trains on windows whose values belong to other windows.

Source: https://github.com/jessicayung/blog-code-snippets/issues/6 (2020-04-10), on
lstm-pytorch/lstm-baseline.py (commit b4e687e).
Root cause (as the issue established it): the (80, 20) matrix of training windows is
reshaped to the LSTM's (seq_len, batch, 1) layout with `X_train.view([input_size, -1, 1])`;
a view keeps the row-major order, so "sequence" b is built from values of several other
windows and no longer precedes its own target.  The fix transposes first:
`X_train.t().view(input_size, -1, 1)`.  (Outside the catalogue: the samples of the batch
are mixed by a reshape.)
Re-created: the script's AR(20) data (100 windows of 20 previous values, the last 20% as
test), LSTM(1, 32) -> Linear(32, 1) on the last time step, MSELoss(reduction='sum'),
Adam lr 1e-2, the whole training set as one batch every step;
differs from the original: the AR coefficients are drawn from the seed (sum of magnitudes
0.95, so the series is stable) instead of the script's fixed table, and a Gaussian
innovation of standard deviation 0.1 keeps the series from decaying to zero (the script
sets noise 0); the model reads the batch size from its input instead of a constructor
argument, so that the test windows can be scored; 300 steps instead of 500 epochs.
Fix: transpose before the view.  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import fixed_from_env, generator, mean_loss  # noqa: E402

KIND = "failure"
STEPS = 300
HARM_METRIC = "val_loss"
INPUT_SIZE, N_WINDOWS, TEST_FRACTION = 20, 100, 0.2


def ar_windows(seed: int):
    """(windows (100, 20), next values (100,)) from a stable AR(20) process."""
    g = generator(seed)
    coeffs = torch.rand(INPUT_SIZE, generator=g) - 0.5
    coeffs = 0.95 * coeffs / coeffs.abs().sum()
    length = N_WINDOWS + 4 * INPUT_SIZE
    y = torch.zeros(length)
    y[:INPUT_SIZE] = torch.randn(INPUT_SIZE, generator=g)
    for i in range(INPUT_SIZE, length):
        y[i] = (y[i - INPUT_SIZE:i].flip(0) * coeffs).sum() + 0.1 * torch.randn(1, generator=g)
    y = y[3 * INPUT_SIZE:]  # burn-in, as the script cuts its first 3 * num_prev points
    x = torch.stack([y[i:i + INPUT_SIZE] for i in range(N_WINDOWS)])
    return x, y[INPUT_SIZE:INPUT_SIZE + N_WINDOWS]


class RNN(nn.Module):
    def __init__(self, input_dim: int = 1, hidden_dim: int = 32):
        super().__init__()
        self.lstm = nn.LSTM(input_dim, hidden_dim)
        self.linear = nn.Linear(hidden_dim, 1)

    def forward(self, seq):  # seq: (seq_len, batch, 1)
        lstm_out, _ = self.lstm(seq)
        return self.linear(lstm_out[-1]).view(-1)


def to_sequences(windows, fixed: bool):
    if fixed:
        return windows.t().reshape(INPUT_SIZE, -1, 1)  # FIX: X.t().view(input_size, -1, 1)
    return windows.reshape(INPUT_SIZE, -1, 1)  # BUG: X.view([input_size, -1, 1])


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    x, y = ar_windows(seed)
    n_test = int(TEST_FRACTION * N_WINDOWS)
    X_train, X_test = to_sequences(x[:-n_test], fixed), to_sequences(x[-n_test:], fixed)
    y_train, y_test = y[:-n_test], y[-n_test:]
    loss_fn = nn.MSELoss(reduction="sum")

    def step(model, optimiser, batch):
        seq, target = batch
        y_pred = model(seq)
        loss = loss_fn(y_pred, target)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        return loss

    return dict(model=RNN,
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-2),
                batches=[(X_train, y_train)], step=step, loss=loss_fn,
                val_batches=[(X_test, y_test)], steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    """Mean squared error per test window (the yardstick is the same for both runs)."""
    return {"val_loss": mean_loss(model, val_batches, nn.functional.mse_loss)}
