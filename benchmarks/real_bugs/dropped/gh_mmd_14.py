"""Dropout is switched off for good after the first validation: evaluate() calls
model.eval() and training never calls model.train() again.

Source: https://github.com/shubhamagarwal92/mmd/issues/14 (2019-07-18).
Root cause (as the issue reported and the maintainer acknowledged; a user confirmed that
adding model.train() after the evaluation fixed their training): train.py's
evaluate() puts the model in eval mode and the training loop never puts it back, so
every step after the first validation trains without dropout.
Re-created: a classifier with dropout 0.5 between wide hidden layers, validated every
25 steps from inside the training step, Adam lr 1e-3, batch 32;
differs from the original: the multimodal hierarchical encoder-decoder replaced by a
2-hidden-layer MLP on 150 seeded noisy training samples of 64 features (few samples, so
that dropout is what keeps the model from memorising them; chosen for the fixed run to
need its dropout, not from the buggy run's numbers), 300 steps.
Fix: model.train() after the evaluation.  Run fixed: FAILURELAB_FIX=1.
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import batched, blobs, fixed_from_env, mean_loss, split  # noqa: E402

KIND = "failure"
STEPS = 300
HARM_METRIC = "val_loss"
VALIDATE_EVERY = 25


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = blobs(seed, 650, 64, 5, noise=2.5)
    Xt, yt, Xv, yv = split(X, y, 500)
    val_batches = batched(Xv, yv, 250)
    criterion = nn.CrossEntropyLoss()

    def evaluate(model):
        model.eval()
        with torch.no_grad():
            return sum(float(criterion(model(x), t)) for x, t in val_batches)

    def step(model, optimizer, batch):
        x, t = batch
        optimizer.zero_grad()
        loss = criterion(model(x), t)
        loss.backward()
        optimizer.step()
        model.steps_taken = getattr(model, "steps_taken", 0) + 1  # per model: per run
        if model.steps_taken % VALIDATE_EVERY == 0:
            evaluate(model)  # BUG: the model stays in eval mode from here on
            if fixed:
                model.train()  # FIX: back to training mode after the evaluation
        return loss

    return dict(model=lambda: nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Dropout(0.5),
                                            nn.Linear(256, 256), nn.ReLU(), nn.Dropout(0.5),
                                            nn.Linear(256, 5)),
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-3),
                batches=batched(Xt, yt, 32), step=step, loss=criterion,
                val_batches=val_batches, steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_loss": mean_loss(model, val_batches, nn.functional.cross_entropy)}
