"""A federated client trained on exp(cross-entropy / eta): the loss falls ~20 iterations, then turns NaN.

Source: https://whosebug.com/question/6301115/Weird-behaviour-of-loss-function-in-pytorch
(a Chinese mirror of a Stack Overflow question, "Weird behaviour of loss function in
pytorch", 2021; the Stack Overflow question id could not be recovered from the mirror, hence
the case name).  The post gives the training loop only: CrossEntropyLoss, eta = 2,
loss = torch.exp(criterion(output, target) / eta), zero_grad/backward/step per batch of a
federated client's train_loader.
Root cause (as the answer established it): exp of an unbounded input is unstable.  The
cross-entropy can become very large when the net confidently predicts a wrong class, and a
single such prediction drives exp to inf; the gradient turns NaN and the next step writes NaN
into the weights and outputs (the answer's example: exp(F.cross_entropy([[-50, 50]], [0]))
= inf).  Note also that d exp(L/eta) = exp(L/eta)/eta * dL: the exponent multiplies every
gradient, so a rise in the loss raises the step size with it.
Re-created: the post's loss line and loop as written (eta = 2, CrossEntropyLoss on the
client model's logits, zero_grad -> backward -> step); differs from the original: the post
gives neither model, data nor optimizer, so we chose them BEFORE any run, from a widely used
federated-learning code base (shaoxiongji/federated-learning, CNNMnist: conv 1->10 k5,
max-pool, ReLU, conv 10->20 k5, Dropout2d, max-pool, ReLU, fc 320->50, ReLU, dropout,
fc 50->10; its client defaults SGD lr 0.01 momentum 0.5, local batch 10), one client only,
seeded 28x28 stroke images in [0, 1] standing in for MNIST (2000 train, 500 validation),
300 steps (1.5 local epochs).  The answer gives no fix; ours is the one its explanation
implies: drop the exponential and train on the cross-entropy itself (divided by eta, so
that only the exp changes).
Fix: loss = criterion(output, target) / eta.  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import accuracy, batched, fixed_from_env, pixels, split  # noqa: E402

KIND = "failure"
STEPS = 300
BATCH = 10
ETA = 2
HARM_METRIC = "val_acc"
N_TRAIN, N_VAL = 2000, 500


class CNNMnist(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.flatten(1)
        x = F.dropout(F.relu(self.fc1(x)), training=self.training)
        return self.fc2(x)


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = pixels(seed, N_TRAIN + N_VAL, 28, 10)
    Xt, yt, Xv, yv = split(X, y, N_VAL)
    g = torch.Generator().manual_seed(seed + 1)
    order = torch.randperm(N_TRAIN, generator=g)  # the client's DataLoader shuffles
    train_batches = batched(Xt[order], yt[order], BATCH)
    criterion = nn.CrossEntropyLoss()

    def step(client_model, optimizer, batch):
        data, target = batch
        client_model.train()
        optimizer.zero_grad()
        output = client_model(data)
        if fixed:
            loss = criterion(output, target) / ETA  # FIX: no exponential of the loss
        else:
            loss = torch.exp(criterion(output, target) / ETA)  # BUG: exp of an unbounded loss
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=CNNMnist,
                optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.5),
                batches=train_batches, step=step, loss=criterion,
                val_batches=batched(Xv, yv, 100), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_acc": accuracy(model, val_batches)}
