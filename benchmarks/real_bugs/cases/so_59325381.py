"""An MNIST CNN reaches ~10 % test accuracy while its training loss falls to nearly 0 (ported from Keras).

Source: https://stackoverflow.com/questions/59325381; code as reproduced in
mehilshah/Bug_Reproducibility_DL_Bugs, Bugs/003 (commit 11b01d6); fix as recorded in the
DeepFD benchmark's patch (ArabelaTso/DeepFD, Benchmark-with-patches.xlsx row 15).
Root cause (as the patch establishes it): a typo, `y_train = y_train/255` where
`x_test = x_test/255` was meant.  The labels become fractions that
sparse_categorical_crossentropy casts to the integer 0, so every training label is class
0 (the loss falls to ~0 by predicting 0), and the test images stay in 0-255 while the
training images are in [0, 1].
Re-created, ported line by line to PyTorch: Conv(64, 3x3, same) -> MaxPool 2 -> Conv(32,
3x3, same) -> MaxPool 2 -> Flatten -> Dense(128, relu) -> Dense(10, softmax); Adam (Keras
default lr 1e-3); sparse categorical cross-entropy with Keras' integer cast of the
labels made explicit; batch 32 (Keras' default);
differs from the original: MNIST replaced by seeded 28x28 stroke images in 0-255
(6000 train / 1000 test); convolutions of 8 channels instead of 64 and 32 so a run
fits in seconds; 150 steps instead of 10 epochs.
Fix: `x_test = x_test/255` instead of `y_train = y_train/255`.  FAILURELAB_FIX=1.
"""
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import batched, fixed_from_env, generator  # noqa: E402

KIND = "failure"
STEPS = 150
HARM_METRIC = "val_acc"
SIDE, CLASSES = 28, 10


def mnist_like(seed: int, n: int):
    """Seeded MNIST stand-in: uint8-range images (n, 1, 28, 28) and digit labels 0-9."""
    g = generator(seed)
    strokes = (torch.rand(CLASSES, SIDE * SIDE, generator=g) < 0.2).float()
    y = torch.randint(CLASSES, (n,), generator=g)
    x = (strokes[y] * 0.8 + 0.35 * torch.randn(n, SIDE * SIDE, generator=g)).clamp(0, 1)
    return (x * 255).round().reshape(n, 1, SIDE, SIDE), y.float()


def make_model() -> nn.Module:
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.MaxPool2d(2),
                         nn.Conv2d(8, 8, 3, padding=1), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(8 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, CLASSES))


def sparse_categorical_crossentropy(logits, labels):
    """Keras' sparse categorical cross-entropy: the labels are cast to integers."""
    return F.cross_entropy(logits, labels.long())


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    x, y = mnist_like(seed, 7000)
    x_train, y_train, x_test, y_test = x[:6000], y[:6000], x[6000:], y[6000:]
    x_train = x_train / 255
    if fixed:
        x_test = x_test / 255  # FIX: the test images scaled like the training images
    else:
        y_train = y_train / 255  # BUG: the labels divided instead of x_test

    def step(model, optimizer, batch):
        images, labels = batch
        loss = sparse_categorical_crossentropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=make_model,
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-3),
                batches=batched(x_train, y_train, 32), step=step,
                loss=sparse_categorical_crossentropy,
                val_batches=batched(x_test, y_test, 500), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    model.eval()
    with torch.no_grad():
        right = sum(int((model(x).argmax(1) == y.long()).sum()) for x, y in val_batches)
    model.train()
    return {"val_acc": right / sum(len(y) for _, y in val_batches)}
