"""Control: "why is training accuracy so low?" -- the accuracy was divided by the dataset size.

Source: https://github.com/xuyxu/Soft-Decision-Tree/issues/6 (2021-09-13).
What the thread established: nothing is wrong with training.  The reporter's added
training-accuracy line divided the number of correct predictions in ONE batch by
`len(train_loader.dataset)` (all 60,000 training images); the maintainer: "replace the
`len(train_loader.dataset)` ... with `data.size(0)`".  The model, the loss and every
update are the repository's defaults, untouched by the fix.
Healthy training: there is no fix to the training.
Re-created: a soft decision tree of depth 5 (31 sigmoid inner nodes on [1, x], 32 leaves
with a linear leaf-to-class map), the balanced-split penalty with lamda 1e-3 decayed by
depth, cross-entropy plus penalty, Adam lr 1e-3 with weight decay 5e-4, batch 128,
10 classes of normalised 28x28 inputs;
differs from the original: MNIST replaced by seeded 28x28 stroke images (common.pixels),
normalised per pixel set; 300 steps instead of 40 epochs.  The step returns the batch
loss; the misprinted accuracy never reaches the optimizer.
Fix: none (a healthy report).  FAILURELAB_FIX switches the printed accuracy's divisor,
which the harm yardstick shows, and nothing else.
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import accuracy, batched, fixed_from_env, pixels, split  # noqa: E402

KIND = "control"
STEPS = 300
HARM_METRIC = "val_acc"
DEPTH, CLASSES, LAMDA, INPUT_DIM = 5, 10, 1e-3, 28 * 28


class SDT(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(INPUT_DIM + 1, 2 ** DEPTH - 1, bias=False)
        self.leaves = nn.Linear(2 ** DEPTH, CLASSES, bias=False)

    def forward(self, x, with_penalty: bool = False):
        x = x.reshape(len(x), -1)
        x = torch.cat([torch.ones(len(x), 1), x], 1)
        p = torch.sigmoid(self.inner(x))
        mu, begin, penalty = torch.ones(len(x), 1), 0, x.new_zeros(())
        for d in range(DEPTH):
            node_p = p[:, begin:begin + 2 ** d]
            alpha = (mu * node_p).sum(0) / mu.sum(0).clamp_min(1e-8)
            alpha = alpha.clamp(1e-6, 1 - 1e-6)
            penalty = penalty - LAMDA * 2.0 ** -d * 0.5 * (alpha.log() + (1 - alpha).log()).sum()
            mu = torch.stack([mu * node_p, mu * (1 - node_p)], 2).reshape(len(x), -1)
            begin += 2 ** d
        out = self.leaves(mu)
        return (out, penalty) if with_penalty else out


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = pixels(seed, 7000, 28, CLASSES)
    X = (X - X.mean()) / X.std()
    Xt, yt, Xv, yv = split(X, y, 1000)
    criterion = nn.CrossEntropyLoss()
    printed = []

    def step(tree, optimizer, batch):
        data, target = batch
        output, penalty = tree(data, with_penalty=True)
        loss = criterion(output, target.view(-1)) + penalty
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        correct = int((output.argmax(1) == target).sum())
        # the reporter's training accuracy: one batch's hits over the whole training set
        printed.append(correct / (len(data) if fixed else len(Xt)))
        return loss

    return dict(model=SDT,
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-3, weight_decay=5e-4),
                batches=batched(Xt, yt, 128), step=step, loss=criterion,
                val_batches=batched(Xv, yv, 500), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_acc": accuracy(model, val_batches)}
