"""Control: "is it normal that the validation loss is lower than the training loss?"

Source: https://github.com/Bjarten/early-stopping-pytorch/issues/18 (2022-07-21; answered
2024-10-15).
What the thread established: nothing is wrong; the MNIST MLP example trains with dropout,
which is active when the training loss is measured and off at validation, so a lower
validation loss is expected.  Healthy training: there is no fix.
Re-created: the example's MLP (784 -> 512 -> 512 -> 10, dropout 0.5, ReLU), Adam,
cross-entropy, batch 256 -- with the same validation every few steps;
differs from the original: MNIST replaced by seeded 28x28 stroke images, 200 steps.
Fix: none (a healthy report).  FAILURELAB_FIX changes nothing.
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import accuracy, batched, fixed_from_env, pixels, split  # noqa: E402

KIND = "control"
STEPS = 200
HARM_METRIC = "val_acc"


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(784, 512), nn.Linear(512, 512), nn.Linear(512, 10)
        self.dropout = nn.Dropout(0.5)

    def forward(self, x):
        x = x.view(-1, 784)
        x = self.dropout(torch.relu(self.fc1(x)))
        x = self.dropout(torch.relu(self.fc2(x)))
        return self.fc3(x)


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed  # a control: nothing to fix
    X, y = pixels(seed, 6000 + 1000, 28, 10, noise=0.6)
    Xt, yt, Xv, yv = split(X, y, 1000)
    criterion = nn.CrossEntropyLoss()

    def step(model, optimizer, batch):
        data, target = batch
        optimizer.zero_grad()
        loss = criterion(model(data), target)
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=Net, optimizer=lambda m: torch.optim.Adam(m.parameters()),
                batches=batched(Xt, yt, 256), step=step, loss=criterion,
                val_batches=batched(Xv, yv, 500), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_acc": accuracy(model, val_batches)}
