"""A binary classifier's probabilities never go below 0.5: one class can never be predicted.

Source: https://discuss.pytorch.org/t/output-of-the-binary-classification-model/56327
(thread 56327; no date in our stored copy).
Root cause (as the thread established it; the poster worked it out and a reply agreed):
the last layer's output went through F.relu before the training step applied
torch.sigmoid, and sigmoid(relu(z)) lies in [0.5, 1), so the network cannot give the
other class a probability above one half; for that class the BCE loss cannot fall below
log 2, and any sample whose logit is negative gets no gradient through the ReLU.  The
fix drops the ReLU on the last layer so the logit reaches the sigmoid unclipped.
Re-created: an "Xception-like" network with three convolutional branches, one per input
scale (16x16, 32x32 and 48x48 patches), whose features are concatenated to 384 values,
then fc_last_1 Linear(384, 64) + ReLU and fc_last_2 Linear(64, 1) + ReLU (the bug);
the step applies torch.sigmoid to the output and nn.BCELoss against float labels of
shape (N, 1), as in the post;
differs from the original: the branches (a stride-4 conv, a depthwise-separable conv
and a 1x1 conv to 128 channels, then global average pooling; kept small so a run takes
a few seconds on one core) stand in for the post's elided "CNN part"; the data are
seeded single-channel 48x48 patches (label 1: a blob near the centre; label 0: a blob
near the border), the 32 and 16 inputs being centre crops of the 48 patch; optimizer
(Adam, lr 1e-3), batch 64 and 200 steps are our choices, the post gives none; the
harm is read on the program's own BCE on held-out patches.
Fix: out = self.fc_last_2(out) without F.relu.  Run fixed: FAILURELAB_FIX=1 or
parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import fixed_from_env, generator  # noqa: E402

KIND = "failure"
STEPS = 200
HARM_METRIC = "val_loss"
SIDE = 48


def patches(seed: int, n: int):
    """(z_16, z_32, z_48, label): noisy 48x48 patches with a Gaussian blob, near the
    centre for label 1 and near the border for label 0; z_32 and z_16 are centre crops."""
    g = generator(seed)
    label = torch.randint(2, (n,), generator=g)
    angle = torch.rand(n, generator=g) * 2 * torch.pi
    radius = torch.where(label == 1, torch.rand(n, generator=g) * 4,
                         14 + torch.rand(n, generator=g) * 6)
    cy, cx = 23.5 + radius * torch.sin(angle), 23.5 + radius * torch.cos(angle)
    grid = torch.arange(SIDE, dtype=torch.float)
    dist2 = (grid.view(1, SIDE, 1) - cy.view(n, 1, 1)) ** 2 \
        + (grid.view(1, 1, SIDE) - cx.view(n, 1, 1)) ** 2
    z48 = torch.exp(-dist2 / (2 * 3.0 ** 2)) + 0.5 * torch.randn(n, SIDE, SIDE, generator=g)
    z48 = z48.unsqueeze(1)
    return z48[:, :, 16:32, 16:32], z48[:, :, 8:40, 8:40], z48, label.float().unsqueeze(1)


def branch() -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(1, 8, 5, stride=4, padding=2), nn.ReLU(),
        nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=8), nn.Conv2d(8, 32, 1), nn.ReLU(),
        nn.Conv2d(32, 128, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())


class XceptionLike(nn.Module):
    def __init__(self, fixed: bool):
        super().__init__()
        self.branch_16, self.branch_32, self.branch_48 = branch(), branch(), branch()
        self.fc_last_1 = nn.Linear(384, 64)
        self.fc_last_2 = nn.Linear(64, 1)
        self.fixed = fixed

    def forward(self, input_16, input_32, input_48):
        out_16 = self.branch_16(input_16)
        out_32 = self.branch_32(input_32)
        out_48 = self.branch_48(input_48)
        out = torch.cat([out_16, out_32, out_48], dim=1)
        out = F.relu(self.fc_last_1(out))
        if self.fixed:
            out = self.fc_last_2(out)  # FIX: the logit goes to the sigmoid unclipped
        else:
            out = F.relu(self.fc_last_2(out))  # BUG: relu then sigmoid gives [0.5, 1)
        return out


def batched4(tensors, size: int) -> list[tuple]:
    n = len(tensors[0])
    return [tuple(t[i:i + size] for t in tensors) for i in range(0, n, size)]


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    data = patches(seed, 2048 + 512)
    train = [t[:2048] for t in data]
    val = [t[2048:] for t in data]
    criterion = nn.BCELoss()

    def step(model, optimizer, batch):
        batch_z_16, batch_z_32, batch_z_48, batch_label = batch
        output = model(batch_z_16, batch_z_32, batch_z_48)  # model prediction
        output = torch.sigmoid(output)
        loss = criterion(output, batch_label)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=lambda: XceptionLike(fixed),
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-3),
                batches=batched4(train, 64), step=step, loss=None,
                val_batches=batched4(val, 256), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    """The program's own criterion (BCE on the sigmoid of the output) on held-out
    patches, in eval mode; the accuracy at the 0.5 threshold is reported beside it."""
    was = model.training
    model.eval()
    bce = nn.BCELoss(reduction="sum")
    total = right = 0
    loss = 0.0
    with torch.no_grad():
        for z16, z32, z48, label in val_batches:
            prob = torch.sigmoid(model(z16, z32, z48))
            loss += float(bce(prob, label))
            right += int(((prob > 0.5).float() == label).sum())
            total += len(label)
    model.train(was)
    return {"val_loss": loss / total, "val_acc": right / total}
