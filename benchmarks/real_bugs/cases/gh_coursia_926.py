"""A one-step-ahead forecaster trains on MSE between a (B, 1) prediction and a (B,) target.

Source: https://github.com/jsboige/CoursIA/pull/926 (2026-05-11).
Root cause (as the PR established it): with pred_len=1 the model returns (B, 1) and the
loader's target is (B,); nn.MSELoss broadcasts them to a (B, B) matrix, so every
prediction is pulled towards every target in the batch (PyTorch warns "Using a target
size ... different to the input size"); the fix is `y_batch.view_as(pred)`.
Re-created: windows of 48 past values -> next value, Adam lr 1e-3, batch 64, MSELoss;
differs from the original: the PR's Mamba/iTransformer/PatchTST/TFT models replaced by a
two-layer MLP (the bug is in the loss call, shared by all four), a seeded noisy AR(2)
series instead of market data, 300 steps.
Fix: `target.view_as(pred)`.  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import batched, fixed_from_env, generator, mean_loss, split  # noqa: E402

KIND = "failure"
STEPS = 300
HARM_METRIC = "val_loss"
WINDOW = 48


def series_windows(seed: int, n: int):
    g = generator(seed)
    x = torch.zeros(n + WINDOW + 1)
    noise = 0.3 * torch.randn(n + WINDOW + 1, generator=g)
    for t in range(2, len(x)):
        x[t] = 1.6 * x[t - 1] - 0.8 * x[t - 2] + noise[t]
    X = torch.stack([x[i:i + WINDOW] for i in range(n)])
    return X, x[WINDOW:WINDOW + n]  # target shape (n,): one value per window


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = series_windows(seed, 3000)
    Xt, yt, Xv, yv = split(X, y, 500)
    criterion = nn.MSELoss()

    def step(model, optimizer, batch):
        x_batch, y_batch = batch
        optimizer.zero_grad()
        pred = model(x_batch)  # (B, 1)
        if fixed:
            loss = criterion(pred, y_batch.view_as(pred))  # FIX: shapes harmonised
        else:
            loss = criterion(pred, y_batch)  # BUG: (B, 1) vs (B,) broadcasts to (B, B)
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=lambda: nn.Sequential(nn.Linear(WINDOW, 64), nn.ReLU(), nn.Linear(64, 1)),
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-3),
                batches=batched(Xt, yt, 64), step=step,
                loss=lambda out, y: criterion(out, y.view_as(out)),
                val_batches=batched(Xv, yv, 250), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_loss": mean_loss(model, val_batches,
                                  lambda out, y: nn.functional.mse_loss(out, y.view_as(out)))}
