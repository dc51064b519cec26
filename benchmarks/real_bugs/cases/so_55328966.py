"""An MNIST MLP on raw 0-255 pixels with SGD lr 0.1: accuracy stays at chance (ported from Keras).

Source: https://stackoverflow.com/questions/55328966; code as reproduced in
mehilshah/Bug_Reproducibility_DL_Bugs, Bugs/001 (commit 11b01d6); fix as recorded in the
DeepFD benchmark's patch (ArabelaTso/DeepFD, Benchmark-with-patches.xlsx row 8).
Root cause (as the patch establishes it): the pixel values read from the CSV are used
as 0-255 instead of [0, 1] (`x_train = x_train.values` where `x_train.values/255` was
needed); with inputs of that size the first update of SGD lr 0.1 is enormous and the
network ends saturated/dead.  DeepFD's patch also changes the output activation and the
optimizer; the missing scaling is the one-line fix used here.
Re-created, ported line by line to PyTorch: Dense(784) (linear) -> Dense(50, relu) ->
Dense(10, sigmoid); Keras categorical cross-entropy on the (renormalised, clipped)
sigmoid outputs; SGD lr 0.1; batch 32; 5000 training images;
differs from the original: MNIST CSV replaced by seeded 28x28 stroke images in 0-255;
150 steps (~1 epoch) instead of 2 epochs.
Fix: x_train = x_train / 255 (and x_test).  Run fixed: FAILURELAB_FIX=1.
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import batched, fixed_from_env, generator  # noqa: E402

KIND = "failure"
STEPS = 150
HARM_METRIC = "val_acc"
SIDE, CLASSES = 28, 10
EPSILON = 1e-7  # Keras' backend epsilon


def mnist_like(seed: int, n: int):
    """Seeded MNIST stand-in: pixel values 0-255 as read from a CSV, labels 0-9."""
    g = generator(seed)
    strokes = (torch.rand(CLASSES, SIDE * SIDE, generator=g) < 0.2).float()
    y = torch.randint(CLASSES, (n,), generator=g)
    x = (strokes[y] * 0.8 + 0.35 * torch.randn(n, SIDE * SIDE, generator=g)).clamp(0, 1)
    return (x * 255).round(), y


def keras_categorical_crossentropy(output, labels):
    output = output / output.sum(dim=-1, keepdim=True)
    output = output.clamp(EPSILON, 1 - EPSILON)
    onehot = nn.functional.one_hot(labels, CLASSES).float()
    return -(onehot * output.log()).sum(dim=-1).mean()


def make_model() -> nn.Module:
    return nn.Sequential(nn.Linear(784, 784), nn.Linear(784, 50), nn.ReLU(),
                         nn.Linear(50, CLASSES), nn.Sigmoid())


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    x, y = mnist_like(seed, 7000)
    scale = 255 if fixed else 1  # BUG: x_train.values  # FIX: x_train.values / 255
    x_train, x_test = x[:5000] / scale, x[5000:] / scale

    def step(model, optimizer, batch):
        images, labels = batch
        loss = keras_categorical_crossentropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=make_model,
                optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=0.1),
                batches=batched(x_train, y[:5000], 32), step=step,
                loss=keras_categorical_crossentropy,
                val_batches=batched(x_test, y[5000:], 500), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    model.eval()
    with torch.no_grad():
        right = sum(int((model(x).argmax(1) == y).sum()) for x, y in val_batches)
    model.train()
    return {"val_acc": right / sum(len(y) for _, y in val_batches)}
