"""An SNLI classifier's hidden layers, kept in a plain Python list, never train.

Source: https://github.com/pytorch/pytorch/issues/715 (2017-02-10).
Root cause (as the maintainers answered): modules stored in a plain list are not
registered, so `model.parameters()` -- and the optimizer built from it -- contains only
the classifier; the hidden Linear layers keep their random initial weights. Fix: wrap the
list in nn.ModuleList.
Re-created: n_layers=2 hidden Linear(n_hid, n_hid) + activation pairs kept in
`self.hids = []`, classifier Linear(n_hid, 3), n_hid 256;
differs from the original: the sentence-pair encoder replaced by seeded 256-d features
whose 3 labels come from a random two-layer teacher (a task that needs trained hidden
layers), Adam lr 1e-3, batch 64, 300 steps.
Fix: `self.hids = nn.ModuleList(...)`.  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
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
N_HID = 256


class SNLINet(nn.Module):
    def __init__(self, registered: bool, n_layers: int = 2):
        super().__init__()
        hids = [nn.Sequential(nn.Linear(N_HID, N_HID), nn.ReLU()) for _ in range(n_layers)]
        if registered:
            self.hids = nn.ModuleList(hids)  # FIX: registered, so parameters() sees them
        else:
            self.hids = hids  # BUG: a plain list hides the layers from parameters()
        self.classifier = nn.Linear(N_HID, 3)

    def forward(self, x):
        for hid in self.hids:
            x = hid(x)
        return self.classifier(x)


def data(seed: int, n: int):
    g = generator(seed)
    X = torch.randn(n, N_HID, generator=g)
    w1 = torch.randn(N_HID, 32, generator=g) / N_HID ** 0.5
    w2 = torch.randn(32, 3, generator=g)
    return X, (torch.tanh(3 * X @ w1) @ w2).argmax(1)


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = data(seed, 6000)
    Xt, yt, Xv, yv = split(X, y, 1000)
    loss_fn = nn.CrossEntropyLoss()

    def step(model, optimizer, batch):
        x, y = batch
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=lambda: SNLINet(registered=fixed),
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-3),
                batches=batched(Xt, yt, 64), step=step, loss=loss_fn,
                val_batches=batched(Xv, yv, 500), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_acc": accuracy(model, val_batches)}
