"""An MNIST MLP trained with softmax output + CrossEntropyLoss reaches 90 % instead of 95 %.

Source: https://github.com/shaoxiongji/federated-learning/issues/9 (2019-12-24).
Root cause (as the issue and the maintainer's fix established it): the MLP ends in a
softmax and its output goes into nn.CrossEntropyLoss, which applies log-softmax itself;
removing the softmax lifted the MLP from 90 % to 95 %.
Re-created: MLP 784 -> 200 -> 10 (dropout, ReLU), SGD lr 0.01 momentum 0.5, batch 10 (the
repository's local batch size), CrossEntropyLoss on a softmax output;
differs from the original: one client instead of federated averaging (the bug is in the
local model, not in the averaging), MNIST replaced by seeded 28x28 stroke images in [0, 1],
300 steps.
Fix: return the logits (no softmax).  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import accuracy, batched, fixed_from_env, pixels, split  # noqa: E402

KIND = "failure"
STEPS = 300
HARM_METRIC = "val_acc"


class MLP(nn.Module):
    def __init__(self, softmax_output: bool):
        super().__init__()
        self.layer_input = nn.Linear(784, 200)
        self.dropout = nn.Dropout()
        self.layer_hidden = nn.Linear(200, 10)
        self.softmax_output = softmax_output

    def forward(self, x):
        x = x.view(-1, 784)
        x = self.layer_hidden(torch.relu(self.dropout(self.layer_input(x))))
        if self.softmax_output:  # BUG: softmax fed to CrossEntropyLoss
            return torch.softmax(x, dim=1)
        return x  # FIX: logits straight into CrossEntropyLoss


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = pixels(seed, 3000 + 500, 28, 10)
    Xt, yt, Xv, yv = split(X, y, 500)
    loss_fn = nn.CrossEntropyLoss()

    def step(model, optimizer, batch):
        images, labels = batch
        optimizer.zero_grad()
        loss = loss_fn(model(images), labels)
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=lambda: MLP(softmax_output=not fixed),
                optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.5),
                batches=batched(Xt, yt, 10), step=step, loss=loss_fn,
                val_batches=batched(Xv, yv, 250), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_acc": accuracy(model, val_batches)}
