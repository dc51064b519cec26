"""Control: "shuffling True on test data decreasing score" -- the training was healthy.

Source: https://github.com/pytorch/pytorch/issues/58986 (2021).
What the thread established: the tabular model trains normally; the drop in score came
from the evaluation code, which compared predictions gathered from a shuffled test loader
with the labels in their original order -- a reporting bug, not a training failure.
Re-created: the issue's model shape (embeddings for categorical columns + continuous
columns -> MLP -> 6 classes), xavier-normal init, Adam lr 1e-3, weight decay 0,
cross-entropy, batch 1000;
differs from the original: seeded data (4 categorical columns, 10 continuous) whose class
comes from a hidden linear score, 200 steps.  The evaluation-order bug is outside the
training loop, so the loop here is the user's, unchanged.
Fix: none for training.  FAILURELAB_FIX changes nothing.
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import accuracy, batched, fixed_from_env, generator, split  # noqa: E402

KIND = "control"
STEPS = 200
HARM_METRIC = "val_acc"
CARDS = (12, 7, 30, 5)


class TestNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.embeddings = nn.ModuleList(nn.Embedding(c, min(50, (c + 1) // 2)) for c in CARDS)
        n_emb = sum(min(50, (c + 1) // 2) for c in CARDS)
        self.lin1, self.lin2, self.lin3 = nn.Linear(n_emb + 10, 200), nn.Linear(200, 70), \
            nn.Linear(70, 6)
        self.bn1, self.bn2 = nn.BatchNorm1d(10), nn.BatchNorm1d(200)
        self.drop = nn.Dropout(0.3)

    def forward(self, x):
        cat = torch.cat([e(x[:, i].long()) for i, e in enumerate(self.embeddings)], 1)
        x = torch.cat([cat, self.bn1(x[:, 4:])], 1)
        x = self.bn2(torch.relu(self.lin1(x)))
        return self.lin3(self.drop(torch.relu(self.lin2(x))))


def make_model():
    model = TestNet()
    for m in model.modules():
        if isinstance(m, nn.Linear):
            nn.init.xavier_normal_(m.weight)
    return model


def data(seed: int, n: int):
    g = generator(seed)
    cats = torch.stack([torch.randint(c, (n,), generator=g) for c in CARDS], 1).float()
    cont = 5 + 3 * torch.randn(n, 10, generator=g)
    effects = [torch.randn(c, 6, generator=g) for c in CARDS]
    W = torch.randn(10, 6, generator=g) / 3
    z = sum(e[cats[:, i].long()] for i, e in enumerate(effects)) + (cont - 5) @ W
    return torch.cat([cats, cont], 1), z.argmax(1)


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed  # a control: nothing to fix
    X, y = data(seed, 10000)
    Xt, yt, Xv, yv = split(X, y, 2000)
    criterion = nn.CrossEntropyLoss()

    def step(model, optim, batch):
        x, y = batch
        output = model(x)
        loss = criterion(output, y)
        optim.zero_grad()
        loss.backward()
        optim.step()
        return loss

    return dict(model=make_model,
                optimizer=lambda m: torch.optim.Adam(
                    [p for p in m.parameters() if p.requires_grad], lr=1e-3, weight_decay=0.0),
                batches=batched(Xt, yt, 1000), step=step, loss=criterion,
                val_batches=batched(Xv, yv, 1000), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_acc": accuracy(model, val_batches)}
