"""A recommender whose model ends in a sigmoid is trained with BCEWithLogitsLoss.

Source: https://github.com/yudi-mars/daisyRec/pull/15 (merged 2023-03-27).
Root cause (as the merged PR states): BCEWithLogitsLoss applies the sigmoid itself, so the
model's own sigmoid makes it a double sigmoid -- outputs squeezed into (0.5, 0.73) -- and
"the loss does not converge"; the fix removes the model's sigmoid.
Re-created: matrix factorisation (user and item embeddings, dot product) for implicit
feedback, BCEWithLogitsLoss, Adam;
differs from the original: seeded interactions from hidden 8-d user/item factors (300 users,
400 items) instead of MovieLens, factor dimension 16, Adam lr 1e-2, batch 256, 300 steps.
Fix: return the raw score (no sigmoid).  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
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
USERS, ITEMS = 300, 400


class MF(nn.Module):
    def __init__(self, sigmoid_output: bool):
        super().__init__()
        self.embed_user = nn.Embedding(USERS, 16)
        self.embed_item = nn.Embedding(ITEMS, 16)
        nn.init.normal_(self.embed_user.weight, std=0.01)
        nn.init.normal_(self.embed_item.weight, std=0.01)
        self.sigmoid_output = sigmoid_output

    def forward(self, pairs):
        score = (self.embed_user(pairs[:, 0]) * self.embed_item(pairs[:, 1])).sum(-1)
        if self.sigmoid_output:
            return torch.sigmoid(score)  # BUG: sigmoid, then BCEWithLogitsLoss's own sigmoid
        return score  # FIX: raw score into BCEWithLogitsLoss


def data(seed: int, n: int):
    g = generator(seed)
    U = torch.randn(USERS, 8, generator=g)
    V = torch.randn(ITEMS, 8, generator=g)
    pairs = torch.stack([torch.randint(USERS, (n,), generator=g),
                         torch.randint(ITEMS, (n,), generator=g)], 1)
    return pairs, ((U[pairs[:, 0]] * V[pairs[:, 1]]).sum(-1) > 0).float()


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = data(seed, 40000)
    Xt, yt, Xv, yv = split(X, y, 4000)
    criterion = nn.BCEWithLogitsLoss()

    def step(model, optimizer, batch):
        pairs, label = batch
        optimizer.zero_grad()
        loss = criterion(model(pairs), label)
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=lambda: MF(sigmoid_output=not fixed),
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-2),
                batches=batched(Xt, yt, 256), step=step, loss=criterion,
                val_batches=batched(Xv, yv, 1000), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    threshold = 0.0 if fixed else 0.5  # a score for the fixed model, a probability for the buggy
    return {"val_acc": accuracy(model, val_batches, lambda out: (out > threshold).float())}
