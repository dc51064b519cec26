"""A text-regression model's labels are silently truncated to integers before training.

Source: https://github.com/deepset-ai/FARM/issues/395 (2020-06-02), on
farm/data_handler/dataset.py up to commit b8c5299; reproduced by the maintainer.
Root cause (as the report and the maintainer established it): the dataset conversion
first tries `torch.tensor(values, dtype=torch.long)` and only falls back to float when
that raises; float regression labels do not raise, they are cast to long, so every
label loses its fraction ("Silent error, all my regression labels are being converted
to longs").  The model then learns to predict the truncated labels.  (Outside the
catalogue: a target of the wrong dtype, silently cast.)
Re-created: a RegressionHead (768 -> 256 -> 1) on 768-d pooled sentence vectors, MSE,
batch 32; the same conversion for the training and the dev set, as FARM applies it to
both;
differs from the original: the transformer replaced by fixed seeded 768-d vectors (the
bug is in the label tensor), continuous labels 0..16 generated from the vectors (the
report does not give its data), AdamW lr 1e-3 for the head alone, 300 steps.  The harm
is measured against the TRUE (float) dev labels; the user's own dev loss, computed on
the truncated labels, cannot show it.
Fix: keep the labels as float.  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
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


class Batches(list):
    """The dev batches as the user's loop sees them, with the true labels kept aside
    for the harm yardstick."""
    true_batches: list


def label_tensor(values: torch.Tensor, fixed: bool) -> torch.Tensor:
    if fixed:
        return values.float()  # FIX: regression labels stay float
    return values.to(torch.long).float()  # BUG: torch.tensor(labels, dtype=torch.long) accepted floats


def data(seed: int, n: int):
    g = generator(seed)
    X = torch.randn(n, 768, generator=g)
    w = torch.randn(768, generator=g) / 768 ** 0.5
    y = (8 + 3 * (X @ w) + 0.3 * torch.randn(n, generator=g)).clamp(0, 16)
    return X, y.unsqueeze(1)


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = data(seed, 3000)
    Xt, yt, Xv, yv = split(X, y, 500)
    loss_fct = nn.MSELoss()
    val = Batches(batched(Xv, label_tensor(yv, fixed), 250))
    val.true_batches = batched(Xv, yv, 250)

    def step(model, optimizer, batch):
        pooled, label_ids = batch
        loss = loss_fct(model(pooled), label_ids)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss

    return dict(model=lambda: nn.Sequential(nn.Linear(768, 256), nn.ReLU(), nn.Linear(256, 1)),
                optimizer=lambda m: torch.optim.AdamW(m.parameters(), lr=1e-3),
                batches=batched(Xt, label_tensor(yt, fixed), 32), step=step, loss=loss_fct,
                val_batches=val, steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    """Dev MSE against the true float labels (the same yardstick for both runs)."""
    return {"val_loss": mean_loss(model, val_batches.true_batches, nn.functional.mse_loss)}
