"""A 784-30-10 sigmoid/softmax MNIST network trained on mean squared error learns slowly (ported from Keras).

Source: https://stackoverflow.com/questions/48385830, as recorded with its patch in the
DeepFD benchmark (ArabelaTso/DeepFD, Benchmark/Benchmark-with-patches.xlsx, row 1,
commit 9fe0895).
Root cause (as the benchmark's patch establishes it): the softmax classifier is compiled
with loss='mean_squared_error'; through a softmax, MSE's gradient vanishes whenever an
output saturates, wrong or right, so with N(0, 1)-initialised weights many samples start
confidently wrong and barely move.  The patch compiles it with categorical_crossentropy
(DeepFD lists activation, loss and learning rate as the faults; the loss is the line its
patch changes).
Re-created, ported line by line to PyTorch: Dense(30, sigmoid) -> Dense(10, softmax),
kernel and bias initialised RandomNormal(stddev=1); SGD lr 3.0; Keras' MSE (mean over the
10 outputs) against one-hot labels;
differs from the original: MNIST replaced by seeded 28x28 stroke images in [0, 1]
(6000 train / 1000 validation); batch 16 (the patch does not record it; 16 is what a
public re-run of this subject uses); 300 steps.
Fix: categorical cross-entropy.  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import batched, fixed_from_env, generator  # noqa: E402

KIND = "failure"
STEPS = 300
HARM_METRIC = "val_acc"
SIDE, CLASSES = 28, 10
EPSILON = 1e-7  # Keras' backend epsilon


def images(seed: int, n: int):
    """Seeded MNIST-like stroke images in [0, 1], flattened to 784."""
    g = generator(seed)
    strokes = (torch.rand(CLASSES, SIDE * SIDE, generator=g) < 0.2).float()
    y = torch.randint(CLASSES, (n,), generator=g)
    x = strokes[y] * 0.8 + 0.5 * torch.randn(n, SIDE * SIDE, generator=g)
    return x.clamp(0, 1), y


def dense(n_in: int, n_out: int) -> nn.Linear:
    layer = nn.Linear(n_in, n_out)
    nn.init.normal_(layer.weight, std=1.0)  # RandomNormal(stddev=1)
    nn.init.normal_(layer.bias, std=1.0)
    return layer


def make_model() -> nn.Module:
    return nn.Sequential(dense(SIDE * SIDE, 30), nn.Sigmoid(), dense(30, CLASSES),
                         nn.Softmax(dim=-1))


def make_loss(fixed: bool):
    def loss_fn(prob, labels):
        onehot = nn.functional.one_hot(labels, CLASSES).float()
        if fixed:  # FIX: loss='categorical_crossentropy'
            return -(onehot * prob.clamp(EPSILON, 1 - EPSILON).log()).sum(-1).mean()
        return ((prob - onehot) ** 2).mean()  # BUG: loss='mean_squared_error'
    return loss_fn


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = images(seed, 7000)
    loss_fn = make_loss(fixed)

    def step(model, optimizer, batch):
        x, labels = batch
        loss = loss_fn(model(x), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=make_model,
                optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=3.0),
                batches=batched(X[:6000], y[:6000], 16), step=step, loss=loss_fn,
                val_batches=batched(X[6000:], y[6000:], 500), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    model.eval()
    with torch.no_grad():
        right = sum(int((model(x).argmax(1) == y).sum()) for x, y in val_batches)
    model.train()
    return {"val_acc": right / sum(len(y) for _, y in val_batches)}
