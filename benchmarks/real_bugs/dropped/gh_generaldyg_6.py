"""A transformer binary classifier returns sigmoid outputs that go into BCE-with-logits.

Source: https://github.com/YXNTU/GeneralDyG/issues/6 (2025-12-09).
Root cause (as the issue established it and the author agreed): TransformerBinaryClassifier
applies a sigmoid before returning, and train.py computes
F.binary_cross_entropy_with_logits on that output -- a double sigmoid, "saturated
gradients and unstable training"; removing the model's sigmoid is the fix.
Re-created: a TransformerEncoder over a sequence, mean pooling, Linear(d, 1), sigmoid,
binary_cross_entropy_with_logits with mean reduction, Adam;
differs from the original: the GNN inputs replaced by seeded sequences of 12 tokens x 16
features whose label is set by a hidden direction, d_model 32, 2 heads, 1 layer,
Adam lr 1e-3, batch 64, 300 steps.
Fix: return the logits.  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import accuracy, batched, fixed_from_env, generator, split  # noqa: E402

KIND = "failure"
STEPS = 300
HARM_METRIC = "val_acc"


class TransformerBinaryClassifier(nn.Module):
    def __init__(self, sigmoid_output: bool):
        super().__init__()
        self.embed = nn.Linear(16, 32)
        layer = nn.TransformerEncoderLayer(32, 2, dim_feedforward=64, batch_first=True,
                                           dropout=0.0)
        self.encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.classifier = nn.Linear(32, 1)
        self.sigmoid = nn.Sigmoid()
        self.sigmoid_output = sigmoid_output

    def forward(self, x):
        logits = self.classifier(self.encoder(self.embed(x)).mean(1))
        if self.sigmoid_output:
            logits = self.sigmoid(logits).squeeze()  # BUG: sigmoid before ..._with_logits
        else:
            logits = logits.squeeze()  # FIX: raw logits
        return logits


def data(seed: int, n: int):
    g = generator(seed)
    X = torch.randn(n, 12, 16, generator=g)
    w = torch.randn(16, generator=g)
    return X, ((X @ w).mean(1) * 12 ** 0.5 > 0).float()


def criterion(logits, labels):
    return torch.mean(F.binary_cross_entropy_with_logits(logits, labels, reduction="none"))


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = data(seed, 5000)
    Xt, yt, Xv, yv = split(X, y, 1000)

    def step(model, optimizer, batch):
        x, labels = batch
        optimizer.zero_grad()
        loss = criterion(model(x), labels)
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=lambda: TransformerBinaryClassifier(sigmoid_output=not fixed),
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-3),
                batches=batched(Xt, yt, 64), step=step, loss=criterion,
                val_batches=batched(Xv, yv, 500), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    threshold = 0.0 if fixed else 0.5
    return {"val_acc": accuracy(model, val_batches, lambda out: (out > threshold).float())}
