"""A tabular regressor is trained on targets cast to integers.

Source: https://github.com/dreamquark-ai/tabnet/pull/7 (2019-10-30, merged): "We were
converting targets to `long` even when `output_dim=1`."
Root cause (as the merged fix states it): the training loop converted every target to
long, the classification dtype, also for a regression model (output_dim 1); the float
targets lost their fractions before the MSE loss saw them.  The fix converts to float
when output_dim is 1.  (Outside the catalogue: a target of the wrong dtype, silently
cast.)
Re-created: a regression model with output_dim 1 on 16 numeric features, MSE loss, Adam
lr 2e-2 and batch 1024 (TabNet's defaults), the targets converted inside the training
step as the loop did;
differs from the original: TabNet's attentive encoder replaced by a 16-64-64-1 MLP (the
bug is in the target conversion, not the architecture); seeded data whose targets are a
smooth function of the features in 0..10 (the PR does not say what data it met);
300 steps.  Validation uses the true float targets.
Fix: convert the targets to float when output_dim == 1.  Run fixed: FAILURELAB_FIX=1.
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
OUTPUT_DIM = 1


def data(seed: int, n: int):
    g = generator(seed)
    X = torch.randn(n, 16, generator=g)
    w = torch.randn(16, 2, generator=g) / 4
    h = X @ w
    y = 5 + 2.0 * torch.tanh(h[:, 0]) + 1.5 * torch.sin(h[:, 1]) + 0.1 * torch.randn(n, generator=g)
    return X, y.clamp(0, 10).unsqueeze(1)


def make_model() -> nn.Module:
    return nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                         nn.Linear(64, OUTPUT_DIM))


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = data(seed, 12288)
    Xt, yt, Xv, yv = split(X, y, 2048)
    loss_fn = nn.MSELoss()

    def step(model, optimizer, batch):
        data_, targets = batch
        if fixed and OUTPUT_DIM == 1:
            targets = targets.float()  # FIX: regression targets stay float
        else:
            targets = targets.long()  # BUG: targets converted to long even when output_dim=1
        optimizer.zero_grad()
        output = model(data_)
        loss = loss_fn(output, targets.float())
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=make_model,
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=2e-2),
                batches=batched(Xt, yt, 1024), step=step, loss=loss_fn,
                val_batches=batched(Xv, yv, 1024), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_loss": mean_loss(model, val_batches, nn.functional.mse_loss)}
