"""A keyword-spotting trainer calls optimizer.step() but never optimizer.zero_grad().

Source: https://github.com/wenet-e2e/wekws/pull/73 (fixes issue #72, merged 2022-05-30).
Root cause (as the PR established it): kws/utils/executor.py calls optimizer.step() after
each backward() but never zeroes the gradients, so every step applies the sum of all
gradients so far; the fix adds optimizer.zero_grad() before loss.backward().
Re-created: a GRU keyword model over 40-d acoustic frames, cross-entropy over keyword /
filler classes, Adam lr 1e-3 (the recipe's optimizer), batch 32;
differs from the original: seeded 30-frame feature sequences (3 classes, a class-specific
pattern in the middle frames) instead of audio, GRU hidden 32 with per-frame logits
max-pooled over time (wekws's max-pooling loss), 300 steps.
Fix: optimizer.zero_grad() before backward().  Run fixed: FAILURELAB_FIX=1.
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import accuracy, batched, fixed_from_env, generator, split  # noqa: E402

KIND = "failure"
STEPS = 300
HARM_METRIC = "val_acc"


class KWSModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(40, 32, batch_first=True)
        self.classifier = nn.Linear(32, 3)

    def forward(self, feats):
        out, _ = self.gru(feats)
        return self.classifier(out).max(dim=1).values  # max-pooling over frames, as wekws does


def data(seed: int, n: int):
    g = generator(seed)
    patterns = torch.randn(3, 10, 40, generator=g)
    y = torch.randint(3, (n,), generator=g)
    X = torch.randn(n, 30, 40, generator=g)
    X[:, 10:20] += patterns[y]
    return X, y


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = data(seed, 3000)
    Xt, yt, Xv, yv = split(X, y, 500)
    criterion = nn.CrossEntropyLoss()

    def step(model, optimizer, batch):
        feats, target = batch
        logits = model(feats)
        loss = criterion(logits, target)
        if fixed:
            optimizer.zero_grad()  # FIX: clear the previous step's gradients
        # BUG: no zero_grad(): backward() adds to every earlier gradient
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=KWSModel, optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-3),
                batches=batched(Xt, yt, 32), step=step, loss=criterion,
                val_batches=batched(Xv, yv, 250), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_acc": accuracy(model, val_batches)}
