"""A distilled CNN student learns from teacher outputs that belong to other images.

Source: https://github.com/haitongli/knowledge-distillation-pytorch/pull/16 (2019-09-04)
and issue #9 (2018-08-10, the batches' labels printed for teacher and student differ).
Root cause (as the PR established it): train.py runs the teacher once over the SHUFFLED
training loader (fetch_teacher_outputs) and keeps the outputs as a list of batches;
train_kd then iterates the loader again -- reshuffled -- and pairs batch i with
`teacher_outputs[i]`, the teacher's logits for other images ("compare the argmax index
with label to find that").  With alpha 0.9 the soft targets carry most of the loss, and
they no longer belong to their samples.  The PR computes the teacher's output for the
same batch inside the loop (torch.no_grad) and reports 86.8% accuracy after the fix.
(The catalogue's shuffled_labels: targets that no longer belong to their samples; here
the teacher's soft targets.)
Re-created: the cnn_distill recipe -- a 3-conv student (c/2c/4c channels, batch norm,
ReLU, max-pool) with a 128-unit dropout-0.1 head, loss_fn_kd = KLDivLoss(log_softmax(s/T),
softmax(t/T)) * alpha * T * T + CE * (1 - alpha), alpha 0.9, T 20, Adam lr 1e-3, batch 128;
differs from the original: CIFAR-10 replaced by seeded 3x16x16 colour images (10
classes, 3840 training / 640 validation); the trained ResNet-18 teacher replaced by a
fixed teacher whose logits are the generator's class log-likelihoods (right on most
images); the teacher table is computed once in one shuffled order and paired with the
training batches in another order that stays the same every pass (the original reshuffles
each epoch, pairing other wrong images each time); num_channels 16 instead of 32 and
100 steps instead of 40 epochs, to run in seconds on a CPU (the first measurement, with
32 channels and 200 steps, took 28 s a run: val_acc buggy 0.152 vs fixed 0.999).
Fix: the teacher's outputs for the same batch.  Run fixed: FAILURELAB_FIX=1.
"""
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import accuracy, batched, fixed_from_env, generator  # noqa: E402

KIND = "failure"
STEPS = 100
HARM_METRIC = "val_acc"
CLASSES, SIDE, ALPHA, T, BATCH = 10, 16, 0.9, 20.0, 128
N_TRAIN, N_VAL, NOISE = 3840, 640, 0.6


def images(seed: int, n: int):
    """Seeded colour images: a smooth pattern per class plus Gaussian noise; the teacher's
    logits are each class's Gaussian log-likelihood of the image."""
    g = generator(seed)
    patterns = F.avg_pool2d(torch.rand(CLASSES, 3, SIDE, SIDE, generator=g), 5, 1, 2)
    patterns = (patterns - patterns.mean()) / patterns.std() * 0.3
    y = torch.randint(CLASSES, (n,), generator=g)
    x = patterns[y] + NOISE * torch.randn(n, 3, SIDE, SIDE, generator=g)
    diff = x.unsqueeze(1) - patterns.unsqueeze(0)  # (n, classes, 3, side, side)
    teacher_logits = -(diff ** 2).sum(dim=(2, 3, 4)) / (2 * NOISE ** 2)
    order = torch.randperm(n, generator=g)  # the order fetch_teacher_outputs saw
    return x, y, teacher_logits, order


class Net(nn.Module):
    def __init__(self, channels: int = 32, dropout: float = 0.1):
        super().__init__()
        c = channels

        def block(cin, cout):
            return [nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(),
                    nn.MaxPool2d(2)]
        self.features = nn.Sequential(*block(3, c), *block(c, 2 * c), *block(2 * c, 4 * c))
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(4 * c * 2 * 2, 4 * c),
                                  nn.BatchNorm1d(4 * c), nn.ReLU(), nn.Dropout(dropout),
                                  nn.Linear(4 * c, CLASSES))

    def forward(self, x):
        return self.head(self.features(x))


def loss_fn_kd(outputs, labels, teacher_outputs):
    soft = nn.KLDivLoss()(F.log_softmax(outputs / T, dim=1), F.softmax(teacher_outputs / T, dim=1))
    return soft * (ALPHA * T * T) + F.cross_entropy(outputs, labels) * (1.0 - ALPHA)


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    x, y, teacher_logits, order = images(seed, N_TRAIN + N_VAL)
    xt, yt, tt = x[:N_TRAIN], y[:N_TRAIN], teacher_logits[:N_TRAIN]
    first_pass = order[order < N_TRAIN]  # the loader's order when the teacher ran
    train = []
    for i in range(0, N_TRAIN, BATCH):
        if fixed:
            teacher_batch = tt[i:i + BATCH]  # FIX: teacher_model(train_batch) under no_grad
        else:
            teacher_batch = tt[first_pass[i:i + BATCH]]  # BUG: teacher_outputs[i], other images
        train.append((xt[i:i + BATCH], yt[i:i + BATCH], teacher_batch))

    def step(model, optimizer, batch):
        train_batch, labels_batch, output_teacher_batch = batch
        output_batch = model(train_batch)
        loss = loss_fn_kd(output_batch, labels_batch, output_teacher_batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=lambda: Net(channels=16),
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-3),
                batches=train, step=step, loss=nn.CrossEntropyLoss(),
                val_batches=batched(x[N_TRAIN:], y[N_TRAIN:], 320), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_acc": accuracy(model, val_batches)}
