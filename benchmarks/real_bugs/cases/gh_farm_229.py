"""A text-regression head trains on MSE between a squeezed (32,) output and (32, 1) labels.

Source: https://github.com/deepset-ai/FARM/issues/229 (2020-02-01), fixed in PR #230.
Root cause (as the maintainer found it): the regression head's logits were squeezed to
(32,) while the labels stayed (32, 1); MSELoss broadcast them to (32, 32) ("Using a target
size (torch.Size([32, 1])) that is different to the input size (torch.Size([32]))") and the
train loss stayed high (218 at epoch 1, labels in 0..16).
Re-created: a RegressionHead [768, 1] on 768-d pooled sentence vectors, labels 0..16, MSE,
batch 32;
differs from the original: DistilBERT replaced by fixed seeded 768-d vectors (the bug is
in the head's loss), AdamW lr 1e-3 for the head alone instead of 2e-5 for the whole
transformer, 300 steps.
Fix: do not squeeze the logits (shapes (32, 1) and (32, 1)).
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


class RegressionHead(nn.Module):
    def __init__(self, squeeze: bool):
        super().__init__()
        self.feed_forward = nn.Sequential(nn.Linear(768, 256), nn.ReLU(), nn.Linear(256, 1))
        self.squeeze = squeeze

    def forward(self, pooled):
        logits = self.feed_forward(pooled)
        if self.squeeze:
            return logits.squeeze(-1)  # BUG: (32,) against labels (32, 1)
        return logits  # FIX: keep (32, 1), the labels' shape


def data(seed: int, n: int):
    g = generator(seed)
    X = torch.randn(n, 768, generator=g)
    w = torch.randn(768, generator=g) / 768 ** 0.5
    y = (8 + 3 * (X @ w) + 0.5 * torch.randn(n, generator=g)).clamp(0, 16)
    return X, y.unsqueeze(1)  # labels (n, 1) as the processor made them


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = data(seed, 3000)
    Xt, yt, Xv, yv = split(X, y, 500)
    loss_fct = nn.MSELoss()

    def step(model, optimizer, batch):
        pooled, label_ids = batch
        loss = loss_fct(model(pooled), label_ids)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss

    return dict(model=lambda: RegressionHead(squeeze=not fixed),
                optimizer=lambda m: torch.optim.AdamW(m.parameters(), lr=1e-3),
                batches=batched(Xt, yt, 32), step=step, loss=loss_fct,
                val_batches=batched(Xv, yv, 250), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_loss": mean_loss(model, val_batches,
                                  lambda out, y: nn.functional.mse_loss(out.reshape(y.shape), y))}
