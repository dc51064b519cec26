"""A PointNet classifier normalises its log-probabilities over the batch, not over the classes.

Source: https://github.com/fxia22/pointnet.pytorch/issues/27 (2018-12-04); the author:
"This issue is fixed in latest master branch, thanks for pointing it out."
Root cause (as the issue established it): PointNetCls.forward ends with
`return F.log_softmax(x, dim=0), trans`; dim 0 of the (batch, classes) scores is the
batch, so each class column is normalised across the samples of the batch and
F.nll_loss trains a per-class ranking of samples instead of a distribution over classes.
The test accuracy reads `pred.max(1)` of the same output.  The fix is dim=-1 (dim=1).
Re-created: PointNet's classification path -- shared per-point MLP (1x1 convolutions with
batch norm and ReLU), max-pooling over the points, then fc-bn-relu, fc-bn-relu, fc to k
classes -- log_softmax on the scores, F.nll_loss, SGD lr 0.01 momentum 0.9, batch 32,
16 classes, points given as (batch, 3, n_points); test accuracy from the model's output
with `.max(1)`, in eval mode, on batches of 32 as the script reads it;
differs from the original: ShapeNet part clouds (2500 points) replaced by seeded clouds of
128 points, each class a fixed set of Gaussian parts, each cloud randomly rotated about z
and jittered; the input/feature transform networks (STN) are left out and the widths
are 32-64-128 / 128-64 instead of 64-128-1024 / 512-256; 200 steps (4 epochs of 1600 clouds) instead of 25 epochs.
Fix: F.log_softmax(x, dim=1).  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
"""
import math
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import batched, fixed_from_env, generator  # noqa: E402

KIND = "failure"
STEPS = 200
HARM_METRIC = "val_acc"
CLASSES, POINTS, PARTS = 16, 128, 4


def clouds(seed: int, n: int):
    """(points (n, 3, POINTS), labels (n,)): each class a fixed set of Gaussian parts."""
    g = generator(seed)
    centres = torch.randn(CLASSES, PARTS, 3, generator=g)
    spreads = 0.2 + 0.4 * torch.rand(CLASSES, PARTS, 3, generator=g)
    y = torch.randint(CLASSES, (n,), generator=g)
    part = torch.randint(PARTS, (n, POINTS), generator=g)
    pts = centres[y[:, None], part] + spreads[y[:, None], part] * torch.randn(
        n, POINTS, 3, generator=g)
    angle = 2 * math.pi * torch.rand(n, generator=g)
    c, s = angle.cos(), angle.sin()
    rot = torch.zeros(n, 3, 3)
    rot[:, 0, 0], rot[:, 0, 1], rot[:, 1, 0], rot[:, 1, 1], rot[:, 2, 2] = c, -s, s, c, 1
    pts = pts @ rot.transpose(1, 2) + 0.02 * torch.randn(n, POINTS, 3, generator=g)
    return pts.transpose(2, 1).contiguous(), y


class PointNetCls(nn.Module):
    def __init__(self, k: int, fixed: bool):
        super().__init__()
        self.fixed = fixed
        self.conv1, self.conv2, self.conv3 = nn.Conv1d(3, 32, 1), nn.Conv1d(32, 64, 1), \
            nn.Conv1d(64, 128, 1)
        self.bnc1, self.bnc2, self.bnc3 = nn.BatchNorm1d(32), nn.BatchNorm1d(64), \
            nn.BatchNorm1d(128)
        self.fc1, self.fc2, self.fc3 = nn.Linear(128, 128), nn.Linear(128, 64), nn.Linear(64, k)
        self.bn1, self.bn2 = nn.BatchNorm1d(128), nn.BatchNorm1d(64)

    def forward(self, x):
        x = F.relu(self.bnc1(self.conv1(x)))
        x = F.relu(self.bnc2(self.conv2(x)))
        x = self.bnc3(self.conv3(x))
        x = torch.max(x, 2)[0]
        x = F.relu(self.bn1(self.fc1(x)))
        x = F.relu(self.bn2(self.fc2(x)))
        x = self.fc3(x)
        if self.fixed:
            return F.log_softmax(x, dim=1)  # FIX: normalise over the classes
        return F.log_softmax(x, dim=0)  # BUG: dim 0 is the batch


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    points, labels = clouds(seed, 2240)

    def step(classifier, optimizer, batch):
        pts, target = batch
        optimizer.zero_grad()
        classifier.train()
        pred = classifier(pts)
        loss = F.nll_loss(pred, target)
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=lambda: PointNetCls(CLASSES, fixed),
                optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9),
                batches=batched(points[:1600], labels[:1600], 32), step=step, loss=F.nll_loss,
                val_batches=batched(points[1600:], labels[1600:], 32), steps=STEPS, seed=seed)


def measure(classifier, test_batches, fixed: bool) -> dict:
    """The script's test accuracy: pred.max(1) of the model's output, in eval mode."""
    was = classifier.training
    classifier.eval()
    correct = total = 0
    with torch.no_grad():
        for pts, target in test_batches:
            pred_choice = classifier(pts).max(1)[1]
            correct += int(pred_choice.eq(target).sum())
            total += len(target)
    classifier.train(was)
    return {"val_acc": correct / total}
