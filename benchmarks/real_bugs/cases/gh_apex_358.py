"""A hand-written binary focal loss on sigmoid outputs turns NaN (then amp's scaler dies).

Source: https://github.com/NVIDIA/apex/issues/358 (2019-06, answer by ptrblck).
Root cause (as the answer established it): the loss computes
torch.log(y_pred) and torch.log(1 - y_pred) on sigmoid outputs after clamping them to
[eps, 1 - eps] with eps = 1e-8; in float32 1 - 1e-8 rounds to 1.0, so a saturated
prediction gives log(0) = -inf, and 0 * -inf = NaN "even in FP32"; the fix adds eps inside
the logs.
Re-created: the loss as in the thread (gamma 0, clamp with eps 1e-8, sum over the two
terms, mean over the batch) on a sigmoid-output MLP, Adam lr 1e-2, batch 32;
differs from the original: seeded separable tabular data (16 features) in place of the
user's data, no amp (the NaN comes from the loss in fp32 already), 300 steps.
Fix: torch.log(y_pred + eps) and torch.log(1 - y_pred + eps).
Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import accuracy, batched, blobs, fixed_from_env, split  # noqa: E402

KIND = "failure"
STEPS = 300
HARM_METRIC = "val_acc"
EPS = 1e-8


def focal_bce(fixed: bool, gamma: float = 0.0):
    def loss(y_pred, y_true):
        y_pred = torch.clamp(y_pred, EPS, 1 - EPS)  # 1 - 1e-8 == 1.0 in float32
        if fixed:  # FIX: eps inside the logs
            log_p, log_q = torch.log(y_pred + EPS), torch.log(1 - y_pred + EPS)
        else:  # BUG: log(1 - 1.0) = -inf, and 0 * -inf = NaN
            log_p, log_q = torch.log(y_pred), torch.log(1 - y_pred)
        terms = (y_true * torch.pow(1 - y_pred, gamma) * log_p
                 + (1 - y_true) * torch.pow(y_pred, gamma) * log_q)
        return -1.0 * terms.sum() / y_pred.size(0)
    return loss


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = blobs(seed, 4000, 16, 2, noise=1.0)
    Xt, yt, Xv, yv = split(X, y.float(), 1000)
    criterion = focal_bce(fixed)

    def step(model, optimizer, batch):
        x, target = batch
        optimizer.zero_grad()
        loss = criterion(model(x).squeeze(1), target)
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=lambda: nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1),
                                            nn.Sigmoid()),
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-2),
                batches=batched(Xt, yt, 32), step=step,
                loss=lambda out, y: criterion(out.squeeze(1), y),
                val_batches=batched(Xv, yv, 500), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_acc": accuracy(model, val_batches, lambda out: (out.squeeze(1) > 0.5).float())}
