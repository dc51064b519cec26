"""The dropout-from-scratch MLP is tested with dropout still on.

Source: https://github.com/d2l-ai/d2l-en/issues/1093 (2020-07-01), on the PyTorch code of
section 4.6.4.2 ("Dropout: implementation from scratch"); addressed in PR #1110.
Root cause (as the issue established it): the model decides whether to drop by an
instance variable `is_training` that is set once and never changed, instead of the
module's own `self.training`; `net.eval()` therefore has no effect and "the test
accuracy is evaluated with dropout enabled".  The fix reads `self.training`.
(The catalogue's eval_mode_forgotten names the effect -- dropout active at evaluation --
although here eval() is called and ignored.)
Re-created: the book's net -- 784 -> 256 -> 256 -> 10 with ReLU, hand-written dropout
(mask from torch.rand > p, scaled by 1/(1-p)) of 0.2 after the first and 0.5 after the
second hidden layer -- cross-entropy, SGD lr 0.5, batch 256;
differs from the original: Fashion-MNIST replaced by seeded 28x28 stroke images
(common.pixels, noise 0.6); 300 steps instead of 10 epochs.
Fix: drop only when self.training.  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
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
DROPOUT1, DROPOUT2 = 0.2, 0.5


def dropout_layer(X, dropout):
    mask = (torch.rand(X.shape) > dropout).float()
    return mask * X / (1.0 - dropout)


class Net(nn.Module):
    def __init__(self, fixed: bool, is_training: bool = True):
        super().__init__()
        self.fixed = fixed
        self.is_training = is_training
        self.lin1, self.lin2, self.lin3 = nn.Linear(784, 256), nn.Linear(256, 256), nn.Linear(256, 10)
        self.relu = nn.ReLU()

    def dropping(self) -> bool:
        # FIX: self.training / BUG: is_training, set once and never reset
        return self.training if self.fixed else self.is_training

    def forward(self, X):
        H1 = self.relu(self.lin1(X.reshape((-1, 784))))
        if self.dropping():
            H1 = dropout_layer(H1, DROPOUT1)
        H2 = self.relu(self.lin2(H1))
        if self.dropping():
            H2 = dropout_layer(H2, DROPOUT2)
        return self.lin3(H2)


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = pixels(seed, 7000, 28, 10, noise=0.6)
    Xt, yt, Xv, yv = split(X, y, 1000)
    loss = nn.CrossEntropyLoss()

    def step(net, trainer, batch):
        X_, y_ = batch
        net.train()
        batch_loss = loss(net(X_), y_)
        trainer.zero_grad()
        batch_loss.backward()
        trainer.step()
        return batch_loss

    return dict(model=lambda: Net(fixed),
                optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=0.5),
                batches=batched(Xt, yt, 256), step=step, loss=loss,
                val_batches=batched(Xv, yv, 500), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    torch.manual_seed(1234)  # the buggy net draws dropout masks at evaluation
    return {"val_acc": accuracy(model, val_batches)}
