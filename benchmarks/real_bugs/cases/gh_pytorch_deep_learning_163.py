"""Control: the confusion-matrix predictions score lower than the trained model -- softmax over the batch.

Source: https://github.com/mrdbourke/pytorch-deep-learning/issues/163 (2022-11-05); the
author agreed ("You are both right") and gave the corrected code.
What the thread established: the TinyVGG model trains normally (its test accuracy from
the evaluation loop is the notebook's reported one); the predictions made afterwards for
the confusion matrix ran `torch.softmax(y_logit.squeeze(), dim=0).argmax(dim=1)` on
logits of shape (32, 10), normalising each class over the 32 images of the batch, so the
predicted classes -- and the accuracy recomputed from them -- are worse than the model's.
The fix is `dim=1`, in code that runs after training.
Healthy training: there is no fix to the training.
Re-created: TinyVGG with 10 hidden units (two blocks of conv3x3-ReLU-conv3x3-ReLU-maxpool,
then Flatten and Linear(10*7*7, 10)), cross-entropy, SGD lr 0.1, batch 32, 1x28x28 images
in [0, 1] of 10 classes; the confusion-matrix predictions made in eval mode under
inference_mode, batch by batch (batch 32) as in the notebook;
differs from the original: FashionMNIST replaced by seeded 28x28 stroke images
(common.pixels); 300 steps instead of 3 epochs.
Fix: none for training.  FAILURELAB_FIX switches the prediction's softmax to dim=1, which
the harm yardstick (the accuracy of those predictions) shows, and nothing else.
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import batched, fixed_from_env, pixels, split  # noqa: E402

KIND = "control"
STEPS = 300
HARM_METRIC = "val_acc"
HIDDEN, CLASSES = 10, 10


class FashionMNISTModelV2(nn.Module):
    def __init__(self):
        super().__init__()
        self.block_1 = nn.Sequential(
            nn.Conv2d(1, HIDDEN, 3, stride=1, padding=1), nn.ReLU(),
            nn.Conv2d(HIDDEN, HIDDEN, 3, stride=1, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.block_2 = nn.Sequential(
            nn.Conv2d(HIDDEN, HIDDEN, 3, padding=1), nn.ReLU(),
            nn.Conv2d(HIDDEN, HIDDEN, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(HIDDEN * 7 * 7, CLASSES))

    def forward(self, x):
        return self.classifier(self.block_2(self.block_1(x)))


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = pixels(seed, 6400, 28, CLASSES)
    Xt, yt, Xv, yv = split(X, y, 1600)
    loss_fn = nn.CrossEntropyLoss()

    def step(model, optimizer, batch):
        x, target = batch
        y_pred = model(x)
        loss = loss_fn(y_pred, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=FashionMNISTModelV2,
                optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=0.1),
                batches=batched(Xt, yt, 32), step=step, loss=loss_fn,
                val_batches=batched(Xv, yv, 32), steps=STEPS, seed=seed)


def measure(model, test_batches, fixed: bool) -> dict:
    """The accuracy of the predictions made for the confusion matrix."""
    model.eval()
    right = total = 0
    with torch.inference_mode():
        for x, target in test_batches:
            y_logit = model(x)
            if fixed:
                y_pred = torch.softmax(y_logit.squeeze(), dim=1).argmax(dim=1)  # FIX: dim=1
            else:
                y_pred = torch.softmax(y_logit.squeeze(), dim=0).argmax(dim=1)  # BUG: dim=0
            right += int((y_pred == target).sum())
            total += len(target)
    model.train()
    return {"val_acc": right / total}
