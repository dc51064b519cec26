"""A binary-output tabular model applies a sigmoid and then BCEWithLogitsLoss by default.

Source: https://github.com/NVIDIA-Merlin/models/pull/1175 (merged 2023-07-04).
Root cause (as the PR states): the PyTorch BinaryOutput block ends in a sigmoid while its
default loss was BCEWithLogitsLoss, "which means we apply sigmoid twice"; the fix changed
the default loss to BCELoss.
Re-created: an MLP over categorical embeddings + continuous features, BinaryOutput =
Linear(., 1) + sigmoid, default loss, Adam;
differs from the original: seeded click data (3 categorical columns, 8 continuous) whose
label comes from a hidden logistic model, MLP 64 -> 32, Adam lr 1e-3, batch 128, 300 steps.
Fix: BCELoss (the output is already a probability).
Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
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
CARDINALITY = (50, 20, 10)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embeddings = nn.ModuleList(nn.Embedding(c, 8) for c in CARDINALITY)
        self.mlp = nn.Sequential(nn.Linear(8 * 3 + 8, 64), nn.ReLU(), nn.Linear(64, 32),
                                 nn.ReLU())
        self.binary_output = nn.Sequential(nn.Linear(32, 1), nn.Sigmoid())

    def forward(self, x):
        cats = [emb(x[:, i].long()) for i, emb in enumerate(self.embeddings)]
        return self.binary_output(self.mlp(torch.cat(cats + [x[:, 3:]], 1))).squeeze(-1)


def data(seed: int, n: int):
    g = generator(seed)
    cats = torch.stack([torch.randint(c, (n,), generator=g) for c in CARDINALITY], 1).float()
    cont = torch.randn(n, 8, generator=g)
    effects = [torch.randn(c, generator=g) for c in CARDINALITY]
    w = torch.randn(8, generator=g)
    z = sum(e[cats[:, i].long()] for i, e in enumerate(effects)) + cont @ w
    return torch.cat([cats, cont], 1), (z > 0).float()


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = data(seed, 12000)
    Xt, yt, Xv, yv = split(X, y, 2000)
    if fixed:
        loss_fn = nn.BCELoss()  # FIX: the output is a probability already
    else:
        loss_fn = nn.BCEWithLogitsLoss()  # BUG: default loss applies a second sigmoid

    def step(model, optimizer, batch):
        x, target = batch
        optimizer.zero_grad()
        loss = loss_fn(model(x), target)
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=Model, optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-3),
                batches=batched(Xt, yt, 128), step=step, loss=loss_fn,
                val_batches=batched(Xv, yv, 1000), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_acc": accuracy(model, val_batches, lambda out: (out > 0.5).float())}
