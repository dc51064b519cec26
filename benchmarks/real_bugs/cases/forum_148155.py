"""A bias-free linear layer cannot learn to add its three inputs: the MSE stays near 0.5.

Source: https://discuss.pytorch.org/t/output-of-the-model-depends-on-the-shape-of-the-weights-tensor/148155
(thread 148155; no date in our stored copy).
Root cause (as the thread's reply established it): the model returns (1024, 1) and the
target y = X.sum(1) is (1024,); nn.MSELoss broadcasts the pair to a (1024, 1024) grid of
every prediction against every target (the "Using a target size ... different to the
input size" warning the poster ignored), so the objective pulls every prediction towards
the mean target instead of its own.  With a (3,)-shaped weight the output happened to be
(1024,) and training worked, which is why the poster blamed the weight's shape and its
initialisation.  The reply's fix, y.unsqueeze(1), makes the two shapes agree.
Re-created: Sequential(Linear(3, 1, bias=False)) with its weight set to zeros of shape
(1, 3) as in the post's option 1; 1024 rows of torch.rand(3) inputs, target the sum of
the three columns; full-batch SGD lr 10e-2; ReduceLROnPlateau('min', factor 0.5,
patience 20) stepped with the training loss after every step; 500 epochs (= steps);
differs from the original: the inputs come from a seeded generator; a held-out set of
512 rows from the same rule is added so the harm is read on the correct (shape-matched)
MSE; the scheduler's verbose printing is left out.
Fix: mse(out, y.unsqueeze(1)).  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import fixed_from_env, generator  # noqa: E402

KIND = "failure"
STEPS = 500
HARM_METRIC = "val_loss"


def sums(seed: int, n: int):
    """Rows of three uniform numbers in [0, 1) and their sum, shape (n,) as in the post."""
    X = torch.rand((n, 3), generator=generator(seed))
    return X, X[:, 0] + X[:, 1] + X[:, 2]


def make_model() -> nn.Module:
    m = nn.Sequential(nn.Linear(3, 1, bias=False))
    m[0].weight = nn.Parameter(torch.tensor([[0, 0, 0]], dtype=torch.float))  # option 1
    return m


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = sums(seed, 1024 + 512)
    mse = nn.MSELoss()
    state = {}

    def make_optimizer(m):
        optim = torch.optim.SGD(m.parameters(), lr=10e-2)
        state["scheduler"] = torch.optim.lr_scheduler.ReduceLROnPlateau(
            optim, "min", factor=0.5, patience=20)
        return optim

    def step(m, optim, batch):
        inputs, target = batch
        optim.zero_grad()
        out = m(inputs)
        if fixed:
            loss = mse(out, target.unsqueeze(1))  # FIX: target reshaped to (N, 1)
        else:
            loss = mse(out, target)  # BUG: (N, 1) against (N,) broadcasts to (N, N)
        loss.backward()
        optim.step()
        state["scheduler"].step(loss)
        return loss

    return dict(model=make_model, optimizer=make_optimizer,
                batches=[(X[:1024], y[:1024])], step=step, loss=None,
                val_batches=[(X[1024:], y[1024:])], steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    """Held-out mean squared error of each prediction against its own target."""
    with torch.no_grad():
        errs = [float(((model(x).squeeze(1) - y) ** 2).mean()) for x, y in val_batches]
    return {"val_loss": sum(errs) / len(errs)}
