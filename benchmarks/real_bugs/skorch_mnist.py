"""skorch's MNIST tutorial (notebooks/MNIST.ipynb), as two real-bug cases re-create it.

gh_skorch_722 (a control) and grist_12 (a failure) run the same tutorial: its
ClassifierModule, NeuralNet's train step and a seeded stand-in for MNIST.  They differ
only in the loss and the optimizer, which each case passes to `parts`.
"""

from __future__ import annotations

import torch
from common import accuracy, batched, generator, mean_loss, split
from torch import nn
from torch.nn import functional as F

MNIST_DIM, HIDDEN_DIM, OUTPUT_DIM = 784, 784 // 8, 10
N_TRAIN, N_VAL, BATCH = 5000, 1250, 128


def digits(seed: int, n: int):
    """Flattened 28x28 images in [0, 1]: half of the class's strokes, 30% of another
    class's, and pixel noise."""
    g = generator(seed)
    strokes = (torch.rand(OUTPUT_DIM, MNIST_DIM, generator=g) < 0.2).float()
    y = torch.randint(OUTPUT_DIM, (n,), generator=g)
    other = (y + torch.randint(1, OUTPUT_DIM, (n,), generator=g)) % OUTPUT_DIM
    x = (strokes[y] * (torch.rand(n, MNIST_DIM, generator=g) < 0.5)
         + strokes[other] * (torch.rand(n, MNIST_DIM, generator=g) < 0.3))
    x = x.clamp(0, 1) * 0.8 + 0.5 * torch.randn(n, MNIST_DIM, generator=g)
    return x.clamp(0, 1), y


class ClassifierModule(nn.Module):
    def __init__(self, input_dim=MNIST_DIM, hidden_dim=HIDDEN_DIM, output_dim=OUTPUT_DIM,
                 dropout=0.5):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.hidden = nn.Linear(input_dim, hidden_dim)
        self.output = nn.Linear(hidden_dim, output_dim)

    def forward(self, X):
        X = F.relu(self.hidden(X))
        X = self.dropout(X)
        return F.softmax(self.output(X), dim=-1)


def nll_of_probabilities(y_pred, y_true):
    """NeuralNetClassifier.get_loss for a softmax module, as fixed: NLLLoss on
    log(p + eps)."""
    return F.nll_loss(torch.log(y_pred + torch.finfo(y_pred.dtype).eps), y_true)


def parts(get_loss, make_optimizer, steps: int, seed: int) -> dict:
    """The keyword arguments for fl.investigate: the tutorial's net, data and train step
    with the case's own loss and optimizer."""
    X, y = digits(seed, N_TRAIN + N_VAL)
    Xt, yt, Xv, yv = split(X, y, N_VAL)

    def step(module, optimizer, batch):  # NeuralNet.train_step for one batch
        Xi, yi = batch
        module.train()
        optimizer.zero_grad()
        y_pred = module(Xi)
        loss = get_loss(y_pred, yi)
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=ClassifierModule, optimizer=make_optimizer,
                batches=batched(Xt, yt, BATCH), step=step, loss=get_loss,
                val_batches=batched(Xv, yv, BATCH), steps=steps, seed=seed)


def measure(model, val_batches) -> dict:
    """Validation accuracy, and the (eps-safe) NLL of the probabilities."""
    return {"val_acc": accuracy(model, val_batches),
            "val_loss": mean_loss(model, val_batches, nll_of_probabilities)}
