"""A 3-class image CNN with one sigmoid output and binary cross-entropy: accuracy stalls (ported from Keras).

Source: https://stackoverflow.com/questions/50079585 ("CNN with keras, accuracy not
improving", 2018); code as reproduced in mehilshah/Bug_Reproducibility_DL_Bugs, Bugs/013
(commit 11b01d6); fix as recorded in the DeepFD benchmark's patch (ArabelaTso/DeepFD,
Benchmark/Benchmark-with-patches.xlsx row 21); the thread's answer, read in a mirror of
the page (newbedev.com/cnn-with-keras-accuracy-not-improving, same code), gives the
same cause and fix.
Root cause (as the answer and the patch establish it): the images belong to three
classes (the folders 01-minor, 02-moderate, 03-severe), but the network ends in
Dense(1) -> sigmoid, is compiled with binary_crossentropy and is fed class_mode='binary'
labels 0, 1, 2.  One sigmoid unit can only say "class 1 or not"; label 2 is outside
[0, 1], so its cross-entropy term rewards pushing the output to 1 without bound (clipped
by Keras at 1 - 1e-7), and the third class can never be predicted.  The fix makes the
head Dense(3) -> softmax with categorical_crossentropy and class_mode='categorical'
(one-hot labels); the lines are switched together here.
Re-created, ported line by line to PyTorch: Conv(32, 3x3) -> ReLU -> MaxPool 2 ->
Conv(32, 3x3) -> ReLU -> MaxPool 2 -> Conv(64, 3x3) -> ReLU -> MaxPool 2 -> Flatten ->
Dense(64) -> ReLU -> Dropout 0.5 -> Dense(1) -> sigmoid, Keras' glorot-uniform weights and
zero biases; Keras binary cross-entropy on the clipped probability; RMSprop with Keras'
defaults (lr 1e-3, rho 0.9, epsilon 1e-7); batch 16; 979 training and 171 validation
images rescaled to [0, 1]; accuracy as Keras computes it for this loss (the rounded
output compared with the label);
differs from the original: the photographs replaced by seeded 3x48x48 colour images
(a smooth pattern per class plus noise) instead of 150x150; no shear/zoom/flip
augmentation; batches in a fixed seeded order; 240 steps (about 4 epochs) instead of
10 epochs of 61 steps.
Fix: Dense(3) -> softmax, categorical_crossentropy, one-hot labels.  Run fixed:
FAILURELAB_FIX=1 or parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import batched, fixed_from_env, generator  # noqa: E402

KIND = "failure"
STEPS = 240
HARM_METRIC = "val_acc"
CLASSES, SIDE = 3, 48
N_TRAIN, N_VAL = 979, 171
EPSILON = 1e-7  # Keras' K.epsilon(), used to clip probabilities inside its losses


def photos(seed: int, n: int):
    """Seeded colour images in [0, 1] (as after rescale=1/255): a smooth pattern per
    class plus pixel noise, with the class index of each image."""
    g = generator(seed)
    patterns = F.avg_pool2d(torch.rand(CLASSES, 3, SIDE, SIDE, generator=g), 9, 1, 4)
    patterns = (patterns - patterns.mean()) / patterns.std() * 0.15 + 0.5
    y = torch.randint(CLASSES, (n,), generator=g)
    x = patterns[y] + 0.25 * torch.randn(n, 3, SIDE, SIDE, generator=g)
    return x.clamp(0, 1), y


def make_model(fixed: bool) -> nn.Module:
    if fixed:
        head = [nn.Linear(64, CLASSES), nn.Softmax(dim=1)]  # FIX: Dense(3), 'softmax'
    else:
        head = [nn.Linear(64, 1), nn.Sigmoid()]  # BUG: Dense(1), 'sigmoid' for 3 classes
    model = nn.Sequential(
        nn.Conv2d(3, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 4 * 4, 64), nn.ReLU(), nn.Dropout(0.5), *head)
    for m in model.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.xavier_uniform_(m.weight)
            nn.init.zeros_(m.bias)
    return model


def binary_crossentropy(prob, y):
    """Keras' binary_crossentropy on a sigmoid output, labels as given (0, 1 or 2)."""
    p = prob.squeeze(1).clamp(EPSILON, 1 - EPSILON)
    return -(y * p.log() + (1 - y) * (1 - p).log()).mean()


def categorical_crossentropy(prob, y):
    """Keras' categorical_crossentropy on a softmax output against one-hot labels."""
    return -(y * prob.clamp(EPSILON, 1 - EPSILON).log()).sum(1).mean()


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    x, y = photos(seed, N_TRAIN + N_VAL)
    if fixed:
        labels = F.one_hot(y, CLASSES).float()  # FIX: class_mode='categorical'
        loss_fn = categorical_crossentropy  # FIX: loss='categorical_crossentropy'
    else:
        labels = y.float()  # BUG: class_mode='binary' hands the labels 0., 1., 2.
        loss_fn = binary_crossentropy  # BUG: loss='binary_crossentropy' for 3 classes

    def step(model, optimizer, batch):
        images, targets = batch
        loss = loss_fn(model(images), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=lambda: make_model(fixed),
                optimizer=lambda m: torch.optim.RMSprop(m.parameters(), lr=1e-3,
                                                        alpha=0.9, eps=1e-7),
                batches=batched(x[:N_TRAIN], labels[:N_TRAIN], 16), step=step,
                loss=loss_fn,
                val_batches=batched(x[N_TRAIN:], labels[N_TRAIN:], 16),
                steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    """Validation accuracy as Keras' 'accuracy' metric computes it for each loss."""
    model.eval()
    right = total = 0
    with torch.no_grad():
        for images, targets in val_batches:
            prob = model(images)
            if fixed:  # categorical accuracy: argmax of output vs argmax of one-hot label
                right += int((prob.argmax(1) == targets.argmax(1)).sum())
            else:  # binary accuracy: the rounded single output vs the label
                right += int((prob.squeeze(1).round() == targets).sum())
            total += len(targets)
    model.train()
    return {"val_acc": right / total}
