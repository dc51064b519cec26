"""A transformer text regressor learns to predict 0: its [0, 1] targets were cast to int64.

Source: https://github.com/amaiya/ktrain/issues/129 (2020-04-22), on
ktrain/text/preprocessor.py (TransformerDataset, commit 62faa15); the maintainer changed
the dtype for regression after the report.  A Keras/TensorFlow program, ported to
PyTorch (the bug is framework-neutral: a dtype cast of the targets).
Root cause (as the thread established it): TransformerDataset casts every y value to
tf.int64, as for class labels; the reporter's regression targets lie between 0 and 1,
so "Casting to tf.int64 makes all target zero" (1.0 alone survives).  The model is
trained to output zero for everything.  (Outside the catalogue: a target of the wrong
dtype, silently cast.)
Re-created: a DistilBERT-style regression head (768 -> 1, linear) on pooled sentence
vectors, MSE, batch 32, the targets cast to int64 by the dataset and back to float by
the loss;
differs from the original: DistilBERT replaced by fixed seeded 768-d vectors (the bug is
in the target tensor); targets in [0, 1] generated from the vectors; Adam lr 1e-3 for
the head alone instead of 5e-5 for the transformer; 300 steps.  Validation measures MSE
against the true float targets.
Fix: keep regression targets float.  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
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


def sentences(seed: int, n: int):
    g = generator(seed)
    X = torch.randn(n, 768, generator=g)
    w = torch.randn(768, generator=g) / 768 ** 0.5
    y = torch.sigmoid(1.5 * (X @ w) + 0.2 * torch.randn(n, generator=g))
    return X, y.unsqueeze(1)


def dataset_targets(y: torch.Tensor, fixed: bool) -> torch.Tensor:
    if fixed:
        return y.float()  # FIX: regression targets kept as float32
    return y.to(torch.int64)  # BUG: TransformerDataset casts y to int64


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = sentences(seed, 3000)
    Xt, yt, Xv, yv = split(X, y, 500)
    loss_fn = nn.MSELoss()

    def step(model, optimizer, batch):
        x, target = batch
        loss = loss_fn(model(x), target.float())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=lambda: nn.Linear(768, 1),
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-3),
                batches=batched(Xt, dataset_targets(yt, fixed), 32), step=step,
                loss=lambda out, t: loss_fn(out, t.float()),
                val_batches=batched(Xv, yv, 250), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_loss": mean_loss(model, val_batches, nn.functional.mse_loss)}
