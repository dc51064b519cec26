"""A 3-label multi-label classifier with a softmax output under MSE (ported from Keras).

Source: https://stackoverflow.com/questions/38648195; code as reproduced in
mehilshah/Bug_Reproducibility_DL_Bugs, Bugs/033 (commit 11b01d6); fix as recorded in the
DeepFD benchmark's patch (ArabelaTso/DeepFD, Benchmark-with-patches.xlsx row 6).
Root cause (as the patch establishes it): a multi-label problem (each sample can carry
several of the 3 labels) is given a softmax output, whose scores must sum to 1, so two
labels can never both be predicted; the patch uses a sigmoid output with binary
cross-entropy instead of softmax with mean squared error (its two changed lines are
switched together here).
Re-created, ported line by line to PyTorch: Dense(20, relu) -> Dropout 0.5 -> Dense(20,
relu) -> Dropout 0.5 -> Dense(3, softmax); MSE; SGD with Keras' default lr 0.01; batch
30; 4000 samples with 20 count features, 80/20 split;
differs from the original: sklearn's make_multilabel_classification replaced by a seeded
stand-in of the same shape (each label present with probability 0.5; the 20 features are
Poisson counts whose rates depend on the labels present); SGD lr 0.1 instead of 0.01 so
that 400 steps (~3.5 epochs of the original 20) show what 20 epochs show.
Fix: Dense(3, activation='sigmoid') with binary_crossentropy.  FAILURELAB_FIX=1.
"""
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import batched, fixed_from_env, generator  # noqa: E402

KIND = "failure"
STEPS = 400
HARM_METRIC = "val_acc"
LABELS, FEATURES = 3, 20


def multilabel(seed: int, n: int = 4000):
    g = generator(seed)
    y = (torch.rand(n, LABELS, generator=g) < 0.5).float()
    rates = torch.rand(LABELS, FEATURES, generator=g) * 3  # each label's word rates
    x = torch.poisson(0.5 + y @ rates, generator=g)
    return x, y


def make_model(fixed: bool) -> nn.Module:
    return nn.Sequential(nn.Linear(FEATURES, 20), nn.ReLU(), nn.Dropout(0.5),
                         nn.Linear(20, 20), nn.ReLU(), nn.Dropout(0.5),
                         nn.Linear(20, LABELS),
                         nn.Sigmoid() if fixed  # FIX: Activation('sigmoid')
                         else nn.Softmax(dim=-1))  # BUG: Activation('softmax')


def make_loss(fixed: bool):
    def loss_fn(prob, y):
        if fixed:  # FIX: loss='binary_crossentropy'
            return F.binary_cross_entropy(prob.clamp(1e-7, 1 - 1e-7), y)
        return F.mse_loss(prob, y)  # BUG: loss='mean_squared_error'
    return loss_fn


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    x, y = multilabel(seed)
    loss_fn = make_loss(fixed)

    def step(model, optimizer, batch):
        inputs, targets = batch
        loss = loss_fn(model(inputs), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=lambda: make_model(fixed),
                optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=0.1),
                batches=batched(x[:3200], y[:3200], 30), step=step, loss=loss_fn,
                val_batches=batched(x[3200:], y[3200:], 400), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    """Exact-match accuracy: every one of the 3 labels right (threshold 0.5)."""
    model.eval()
    with torch.no_grad():
        right = sum(int(((model(x) > 0.5).float() == y).all(1).sum()) for x, y in val_batches)
    model.train()
    return {"val_acc": right / sum(len(y) for _, y in val_batches)}
