"""A runtime regressor on raw layout features keeps its loss flat at ~7500.

Source: https://github.com/thanhhau097/google_fast_or_slow/pull/1 (merged 2023-10-23).
Root cause (as the PR established it): the layout features went into the model unscaled
(counts and sizes spanning orders of magnitude); the loss sat at ~7533 for 15 epochs and
"started converging" once a MinMaxScaler was applied to the features.
Re-created: an MLP regressor on per-graph configuration features, AdamW lr 1e-4, MSE;
differs from the original: the graph network replaced by an MLP over 40 seeded features
whose scales span 1 to 1e4 (as raw tensor sizes do), a target on the scale of the
original loss, batch 64, 300 steps.
Fix: MinMaxScaler fitted on the training features.
Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
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


def data(seed: int, n: int):
    g = generator(seed)
    scales = 10 ** (4 * torch.rand(40, generator=g))  # feature ranges from 1 to 1e4
    U = torch.rand(n, 40, generator=g)
    w = torch.randn(40, generator=g)
    y = 100 * torch.tanh(U @ w / 3) + 5 * torch.randn(n, generator=g)
    return U * scales, y.unsqueeze(1)


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = data(seed, 4000)
    Xt, yt, Xv, yv = split(X, y, 500)
    if fixed:  # FIX: MinMaxScaler fitted on the training split
        lo, hi = Xt.min(0).values, Xt.max(0).values
        Xt, Xv = (Xt - lo) / (hi - lo), (Xv - lo) / (hi - lo)
    # BUG: raw layout features straight into the model
    criterion = nn.MSELoss()

    def step(model, optimizer, batch):
        x, target = batch
        optimizer.zero_grad()
        loss = criterion(model(x), target)
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=lambda: nn.Sequential(nn.Linear(40, 128), nn.ReLU(), nn.Linear(128, 64),
                                            nn.ReLU(), nn.Linear(64, 1)),
                optimizer=lambda m: torch.optim.AdamW(m.parameters(), lr=1e-4),
                batches=batched(Xt, yt, 64), step=step, loss=criterion,
                val_batches=batched(Xv, yv, 500), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_loss": mean_loss(model, val_batches, nn.functional.mse_loss)}
