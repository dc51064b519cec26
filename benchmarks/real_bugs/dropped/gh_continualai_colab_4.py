"""Control: log_softmax applied before F.cross_entropy -- redundant, and harmless.

Source: https://github.com/ContinualAI/colab/pull/4 (merged 2019-01-29).
What the thread established: the notebook's MNIST model returned log_softmax outputs and
the loss was F.cross_entropy, which applies log_softmax again; the PR removed the extra
call but states "this modify doesn't affect the results" -- log_softmax is idempotent
(log_softmax(log_softmax(x)) = log_softmax(x)), so loss and gradients are unchanged.
Healthy training.
Re-created: the tutorial's small CNN (two conv layers, dropout, two linear layers,
log_softmax output), F.cross_entropy, SGD lr 0.01 momentum 0.5, batch 64;
differs from the original: MNIST replaced by seeded 28x28 stroke images, 200 steps.
Fix: none needed; FAILURELAB_FIX=1 returns the raw logits instead (same training).
"""
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import accuracy, batched, fixed_from_env, pixels, split  # noqa: E402

KIND = "control"
STEPS = 200
HARM_METRIC = "val_acc"


class Net(nn.Module):
    def __init__(self, log_softmax_output: bool):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)
        self.log_softmax_output = log_softmax_output

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = F.dropout(F.relu(self.fc1(x.view(-1, 320))), training=self.training)
        x = self.fc2(x)
        return F.log_softmax(x, dim=1) if self.log_softmax_output else x


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = pixels(seed, 4000 + 1000, 28, 10, noise=0.5)
    Xt, yt, Xv, yv = split(X, y, 1000)

    def step(model, optimizer, batch):
        data, target = batch
        optimizer.zero_grad()
        loss = F.cross_entropy(model(data), target)
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=lambda: Net(log_softmax_output=not fixed),
                optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.5),
                batches=batched(Xt, yt, 64), step=step, loss=F.cross_entropy,
                val_batches=batched(Xv, yv, 500), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_acc": accuracy(model, val_batches)}
