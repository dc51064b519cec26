"""Control: "the training loss might not be summed" -- the printed loss is a single batch's.

Source: https://github.com/creafz/pytorch-cnn-finetune/issues/1 (2018-03-26); the author
changed the example's printing in commit 20a6182 ("Print average loss in the cifar10
example").
What the thread established: nothing is wrong with training. examples/cifar10.py prints
`loss.data[0]` every log_interval batches, i.e. the loss of that one batch, not an
average over the batches since the last print; the author switched the print to the
average loss. The model, the optimizer and every update are unchanged by the fix.
Healthy training: there is no fix to the training.
Re-created: the example's loop -- a CNN with a dropout-0.2 classifier head over 10 classes,
cross-entropy, SGD lr 0.01, momentum 0.9, batch 32, test batch 64, inputs normalised with
the model's mean and std; the step returns that batch's loss, as the print shows it;
differs from the original: a pretrained ResNet-50 on CIFAR-10 replaced by a 2-conv CNN
trained from scratch on seeded 3x16x16 colour images (10 classes, 3200 train, 640 test);
200 steps instead of 100 epochs.
Fix: none (a healthy report).  FAILURELAB_FIX changes nothing.
"""
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import accuracy, batched, fixed_from_env, generator  # noqa: E402

KIND = "control"
STEPS = 200
HARM_METRIC = "val_acc"
CLASSES, SIDE = 10, 16


def images(seed: int, n: int):
    """Seeded colour images, normalised per channel like the example's transform."""
    g = generator(seed)
    patterns = F.avg_pool2d(torch.rand(CLASSES, 3, SIDE, SIDE, generator=g), 5, 1, 2)
    patterns = (patterns - patterns.mean()) / patterns.std() * 0.3 + 0.5
    y = torch.randint(CLASSES, (n,), generator=g)
    x = (patterns[y] + 0.3 * torch.randn(n, 3, SIDE, SIDE, generator=g)).clamp(0, 1)
    mean, std = x.mean(dim=(0, 2, 3), keepdim=True), x.std(dim=(0, 2, 3), keepdim=True)
    return (x - mean) / std, y


def make_model() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Dropout(0.2), nn.Linear(32 * 4 * 4, CLASSES))


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed  # a control: nothing to fix
    x, y = images(seed, 3840)
    criterion = nn.CrossEntropyLoss()

    def step(model, optimizer, batch):
        data, target = batch
        optimizer.zero_grad()
        output = model(data)
        loss = criterion(output, target)
        loss.backward()
        optimizer.step()
        return loss  # printed every log_interval batches as this one batch's loss

    return dict(model=make_model,
                optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9),
                batches=batched(x[:3200], y[:3200], 32), step=step, loss=criterion,
                val_batches=batched(x[3200:], y[3200:], 64), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_acc": accuracy(model, val_batches)}
