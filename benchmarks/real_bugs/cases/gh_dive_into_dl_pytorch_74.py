"""Control: the epoch's printed training loss is divided by the number of samples, not batches.

Source: https://github.com/ShusenTang/Dive-into-DL-PyTorch/issues/74 (2019-12-12); the
author agreed ("你说得对", you are right: it should be divided by the number of batches,
because nn.CrossEntropyLoss() already averages over the batch) on 2019-12-18.
What the thread established: nothing is wrong with training. In sections 3.7 and 3.9
train_ch3 adds each batch's loss -- already a batch mean -- into train_l_sum and prints
train_l_sum / n with n the number of samples, so the printed loss is the true mean
divided by the batch size (256). The model, the optimizer and every update are the same
either way.
Healthy training: there is no fix to the training.
Re-created: section 3.7's concise softmax regression -- Flatten, Linear(784, 10) with
weights drawn from N(0, 0.01) and zero bias, nn.CrossEntropyLoss(), SGD lr 0.1, batch
256 -- with train_ch3's bookkeeping kept beside the step (the printed value is computed
at the end of every epoch and never feeds back into training); test accuracy as
evaluate_accuracy computes it;
differs from the original: Fashion-MNIST replaced by seeded 1x28x28 stroke images in
[0, 1] (common.pixels, 10 classes); 300 steps instead of 5 epochs.
Fix: none for training.  FAILURELAB_FIX divides the printed sum by the number of
batches, which changes nothing the harness measures.
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
BATCH, N_TRAIN = 256, 6144


def make_net() -> nn.Module:
    net = nn.Sequential(nn.Flatten(), nn.Linear(784, 10))
    nn.init.normal_(net[1].weight, mean=0, std=0.01)
    nn.init.constant_(net[1].bias, val=0)
    return net


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = pixels(seed, N_TRAIN + 1536, 28, 10)
    Xt, yt, Xv, yv = split(X, y, 1536)
    loss = nn.CrossEntropyLoss()
    book = {"train_l_sum": 0.0, "n": 0, "batches": 0, "printed": []}

    def step(net, optimizer, batch):
        X_, y_ = batch
        y_hat = net(X_)
        l = loss(y_hat, y_).sum()  # noqa: E741 - the book's name
        optimizer.zero_grad()
        l.backward()
        optimizer.step()
        book["train_l_sum"] += l.item()
        book["n"] += y_.shape[0]
        book["batches"] += 1
        if book["batches"] % (N_TRAIN // BATCH) == 0:  # the epoch's print
            if fixed:
                book["printed"].append(book["train_l_sum"] / book["batches"])  # FIX
            else:
                book["printed"].append(book["train_l_sum"] / book["n"])  # BUG: / samples
            book.update(train_l_sum=0.0, n=0, batches=0)
        return l

    return dict(model=make_net,
                optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=0.1),
                batches=batched(Xt, yt, BATCH), step=step, loss=loss,
                val_batches=batched(Xv, yv, BATCH), steps=STEPS, seed=seed)


def measure(net, val_batches, fixed: bool) -> dict:
    """evaluate_accuracy: test accuracy, the same for both (the fix is in a print)."""
    return {"val_acc": accuracy(net, val_batches)}
