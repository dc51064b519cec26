"""A hand-written cross-entropy, equal to CrossEntropyLoss(reduction="sum") at first, turns NaN after epochs.

Source: https://stackoverflow.com/questions/69235383 ("pytorch custom loss function
nn.CrossEntropyLoss", 2021; read through its mirror https://coderoad.ru/69235383/); listed
in mehilshah/Bug_Reproducibility_DL_Bugs, Dataset/DL_Bugs.csv (type "training").
Root cause (as the answer established it): the loss is written as
log(sum_j exp(l_j)) - l_target, summed over the batch.  torch.nn.CrossEntropyLoss differs
from it by the trick that guards the exponential against large values: it subtracts the
largest logit before exponentiating (log-sum-exp).  Without it, exp of a logit above ~88
overflows float32 to inf, inf - inf gives NaN, and the NaN reaches every weight.  The
poster's own numbers agree: the two losses are equal (147.5397) on the first batch, the
hand-written one turns NaN after 4 epochs, nn.CrossEntropyLoss trains.
Re-created: the poster's loss as written (exp, log of the row sum, one-hot product with the
logits, torch.sum over the batch), 10 classes, batch 64 (147.54 / log 10 = 64.05 is the
first batch's summed loss at chance); the names in the post (train_dl, inputs/targets,
model) are those of the PyTorch tutorial "What is torch.nn really?", so we take its
Mnist_CNN (three stride-2 3x3 convolutions 1->16->16->10 with ReLU, 4x4 average pool,
inputs 784-vectors viewed as 28x28) and its optimizer (SGD lr 0.1, momentum 0.9);
differs from the original: the model and optimizer are this inference (the post shows
neither), seeded 28x28 stroke images in [0, 1] stand in for MNIST (3200 train, 640
validation), 300 steps (6 epochs of the stand-in) instead of the poster's 4+ MNIST epochs.
Fix: A = torch.logsumexp(outputs, dim=1).  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
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
BS = 64
HARM_METRIC = "val_acc"
N_TRAIN, N_VAL = 3200, 640


class Mnist_CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, kernel_size=3, stride=2, padding=1)
        self.conv2 = nn.Conv2d(16, 16, kernel_size=3, stride=2, padding=1)
        self.conv3 = nn.Conv2d(16, 10, kernel_size=3, stride=2, padding=1)

    def forward(self, xb):
        xb = xb.view(-1, 1, 28, 28)
        xb = F.relu(self.conv1(xb))
        xb = F.relu(self.conv2(xb))
        xb = F.relu(self.conv3(xb))
        xb = F.avg_pool2d(xb, 4)
        return xb.view(-1, xb.size(1))


def make_loss(fixed: bool):
    def myCEE(outputs, targets):
        if fixed:
            A = torch.logsumexp(outputs, dim=1)  # FIX: log-sum-exp, largest logit subtracted
        else:
            exp = torch.exp(outputs)  # BUG: exp of raw logits overflows float32 above ~88
            A = torch.log(torch.sum(exp, dim=1))
        hadamard = F.one_hot(targets, num_classes=10).float() * outputs
        B = torch.sum(hadamard, dim=1)
        return torch.sum(A - B)
    return myCEE


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = pixels(seed, N_TRAIN + N_VAL, 28, 10)
    X = X.reshape(len(X), 784)
    Xt, yt, Xv, yv = split(X, y, N_VAL)
    g = torch.Generator().manual_seed(seed + 1)
    batches = []  # DataLoader(train_ds, batch_size=bs, shuffle=True): reshuffled each epoch
    while len(batches) < STEPS:
        order = torch.randperm(N_TRAIN, generator=g)
        batches += batched(Xt[order], yt[order], BS)
    loss_func = make_loss(fixed)

    def step(model, opt, batch):
        inputs, targets = batch
        loss = loss_func(model(inputs), targets)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    return dict(model=Mnist_CNN,
                optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9),
                batches=batches[:STEPS], step=step, loss=loss_func,
                val_batches=batched(Xv, yv, 128), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_acc": accuracy(model, val_batches)}
