"""Control: "validation loss is lower than training loss in the MNIST tutorial" -- expected.

Source: https://github.com/skorch-dev/skorch/issues/722 (2020-11-19; answered and closed by
the maintainer 2020-11-19 / 2020-12-29), on notebooks/MNIST.ipynb.
What the thread established: nothing is wrong.  The reporter saw valid_loss below
train_loss at every epoch of the tutorial and thought that impossible with properly
shuffled data.  The maintainer's answer: skorch's train_loss is the mean of the batch
losses taken *while* the net trains through the epoch, and valid_loss is computed after
the epoch, on a net that has already improved (or the gap is chance).  The tutorial's
module also drops half of its hidden units (dropout 0.5) in the training forward only.
Healthy training: there is no fix.
Re-created: the tutorial's ClassifierModule (784 -> 98 ReLU -> Dropout 0.5 -> 10 -> softmax),
skorch's NeuralNetClassifier loss for a softmax module (NLLLoss on log(p + eps), the form
skorch used since 2019), its default optimizer SGD at the tutorial's lr 0.1, batch 128,
a held-out fifth of the data for validation, pixels scaled to [0, 1];
differs from the original: MNIST replaced by seeded 28x28 stroke images (5000 training,
1250 validation; each keeps half of its class's strokes and picks up some of another
class's, so that the net, like the tutorial's, stays a few per cent short of perfect),
300 steps (under 8 epochs) instead of 20 epochs; the epoch averages skorch prints are
not re-created (the step returns each batch's loss).
Fix: none (a healthy report).  FAILURELAB_FIX changes nothing.
"""
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import accuracy, batched, fixed_from_env, generator, mean_loss, split  # noqa: E402

KIND = "control"
STEPS = 300
HARM_METRIC = "val_acc"
MNIST_DIM, HIDDEN_DIM, OUTPUT_DIM = 784, 784 // 8, 10


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
    """NeuralNetClassifier.get_loss for a softmax module: NLLLoss on log(p + eps)."""
    eps = torch.finfo(y_pred.dtype).eps
    return F.nll_loss(torch.log(y_pred + eps), y_true)


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed  # a control: nothing to fix
    X, y = digits(seed, 5000 + 1250)
    Xt, yt, Xv, yv = split(X, y, 1250)

    def step(module, optimizer, batch):  # NeuralNet.train_step for one batch
        Xi, yi = batch
        module.train()
        optimizer.zero_grad()
        y_pred = module(Xi)
        loss = nll_of_probabilities(y_pred, yi)
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=ClassifierModule,
                optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=0.1),
                batches=batched(Xt, yt, 128), step=step, loss=nll_of_probabilities,
                val_batches=batched(Xv, yv, 128), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_acc": accuracy(model, val_batches),
            "val_loss": mean_loss(model, val_batches, nll_of_probabilities)}
