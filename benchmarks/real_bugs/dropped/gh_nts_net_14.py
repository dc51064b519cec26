"""A fine-grained classifier gives different answers at test time: its dropout never turns off.

Source: https://github.com/yangze0930/NTS-Net/issues/14 (2019-02-13), on core/resnet.py
line 148; confirmed by two further users ("the model returns at test time different
results").
Root cause (as the issue established it): the ResNet's forward pass builds its dropout
on the fly, `x = nn.Dropout(p=0.5)(x)`; a module created inside forward is always in
training mode, so `net.eval()` does not reach it and every test prediction is made with
half the pooled features dropped.  The fix registers `self.drop = nn.Dropout(p=0.5)` in
__init__ (or calls F.dropout with training=self.training).  (The catalogue's
eval_mode_forgotten names the effect -- dropout active at evaluation -- although here
eval() is called and cannot reach the layer.)
Re-created: the classifier end of the network -- 2048-d pooled features, dropout 0.5,
Linear(2048, 200) for CUB-200's classes -- cross-entropy, SGD lr 1e-3 momentum 0.9
weight decay 1e-4, batch 16, as the repository's config;
differs from the original: the ResNet-50 trunk replaced by fixed seeded non-negative
2048-d "pooled features" (200 class centres in a 64-d latent space, spread over 2048
channels through a ReLU, 30 images a class for training, 10 for test); the navigator
and part branches are not re-created; 600 steps.
Fix: a registered dropout layer, switched off by eval().  Run fixed: FAILURELAB_FIX=1.
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import accuracy, batched, fixed_from_env, generator  # noqa: E402

KIND = "failure"
STEPS = 600
HARM_METRIC = "val_acc"
CLASSES, FEATURES, LATENT = 200, 2048, 64


class Head(nn.Module):
    def __init__(self, fixed: bool):
        super().__init__()
        self.fixed = fixed
        self.drop = nn.Dropout(p=0.5)
        self.fc = nn.Linear(FEATURES, CLASSES)

    def forward(self, x):
        if self.fixed:
            x = self.drop(x)  # FIX: self.drop registered in __init__, off after eval()
        else:
            x = nn.Dropout(p=0.5)(x)  # BUG: a fresh module, always in training mode
        return self.fc(x)


def pooled_features(seed: int, per_class: int):
    g = generator(seed)
    centres = torch.randn(CLASSES, LATENT, generator=g)
    spread = torch.randn(LATENT, FEATURES, generator=g) / LATENT ** 0.5
    y = torch.arange(CLASSES).repeat_interleave(per_class)
    z = centres[y] + 0.8 * torch.randn(len(y), LATENT, generator=g)
    x = torch.relu(z @ spread)
    order = torch.randperm(len(y), generator=g)
    return x[order], y[order]


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = pooled_features(seed, 40)
    n_test = 10 * CLASSES
    Xt, yt, Xv, yv = X[n_test:], y[n_test:], X[:n_test], y[:n_test]
    creterion = nn.CrossEntropyLoss()

    def step(net, optimizer, batch):
        img, label = batch
        optimizer.zero_grad()
        loss = creterion(net(img), label)
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=lambda: Head(fixed),
                optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=1e-3, momentum=0.9,
                                                    weight_decay=1e-4),
                batches=batched(Xt, yt, 16), step=step, loss=creterion,
                val_batches=batched(Xv, yv, 500), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    torch.manual_seed(1234)  # the buggy head draws dropout masks at test time
    return {"val_acc": accuracy(model, val_batches)}
