"""A blob classifier trained one sample at a time with momentum SGD: the loss oscillates (ported from Keras).

Source: https://github.com/shiningrain/AUTOTRAINER, AutoTrainer/demo_case/
Oscillating_Loss_Case (model.h5's architecture, config.pkl's settings, data/simplednn.py),
commit 03a463e: the AUTOTRAINER authors' demonstration of an unstable (oscillating) loss
(a Keras program built to show the problem, not a user's report).
Root cause (as the demo sets it up and AUTOTRAINER repairs it): SGD with lr 0.01 and
momentum 0.9 on batches of a single sample: every step follows one sample's gradient,
amplified by momentum, so the loss jumps from step to step instead of settling.
AUTOTRAINER's recorded repair ('unstable_adam') switches the optimizer to Adam.
Re-created, ported line by line to PyTorch: Dense(50, relu, he_uniform) -> Dense(3,
softmax, glorot_uniform); categorical cross-entropy; SGD lr 0.01 momentum 0.9, batch 1;
1000 blobs (3 centres, 2 features, std 2) split 700 / 300 as simplednn's 'blob' data;
differs from the original: the blobs are drawn from a seeded torch.Generator (make_blobs'
recipe); 700 steps (one epoch) instead of 200 epochs.
Fix: Adam (Keras default lr 1e-3) instead of SGD(0.01, momentum 0.9).  FAILURELAB_FIX=1.
"""
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import batched, fixed_from_env, generator  # noqa: E402

KIND = "failure"
STEPS = 700
HARM_METRIC = "val_acc"


def blobs(seed: int, n: int = 1000, centres: int = 3, std: float = 2.0):
    """make_blobs' recipe: centres uniform in [-10, 10], Gaussian clusters of `std`."""
    g = generator(seed)
    c = torch.rand(centres, 2, generator=g) * 20 - 10
    y = torch.randint(centres, (n,), generator=g)
    return c[y] + std * torch.randn(n, 2, generator=g), y


def make_model() -> nn.Module:
    hidden, out = nn.Linear(2, 50), nn.Linear(50, 3)
    nn.init.kaiming_uniform_(hidden.weight, nonlinearity="relu")
    nn.init.xavier_uniform_(out.weight)
    nn.init.zeros_(hidden.bias)
    nn.init.zeros_(out.bias)
    return nn.Sequential(hidden, nn.ReLU(), out)  # softmax folded into the loss below


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = blobs(seed)
    loss_fn = nn.CrossEntropyLoss()  # = softmax output + categorical cross-entropy

    def make_optimizer(model):
        if fixed:
            return torch.optim.Adam(model.parameters(), lr=1e-3)  # FIX: Adam
        return torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)  # BUG: at batch 1

    def step(model, optimizer, batch):
        x, labels = batch
        loss = loss_fn(model(x), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=make_model, optimizer=make_optimizer,
                batches=batched(X[:700], y[:700], 1), step=step, loss=loss_fn,
                val_batches=batched(X[700:], y[700:], 300), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    model.eval()
    with torch.no_grad():
        right = sum(int((model(x).argmax(1) == y).sum()) for x, y in val_batches)
        loss = sum(float(F.cross_entropy(model(x), y)) for x, y in val_batches)
    model.train()
    return {"val_acc": right / sum(len(y) for _, y in val_batches),
            "val_loss": loss / len(val_batches)}
