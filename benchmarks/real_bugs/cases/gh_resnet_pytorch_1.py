"""A ResNet classifier trains well but its validation/test accuracy is very low.

Source: https://github.com/JeasunLok/ResNet-pytorch/issues/1 (2023-12-18); the author's
fix is commit ecc4991 ("fix: transform bugs").
Root cause (as the author answered and fixed it): the training set was built with the
transform `ToTensor()` (pixels 0-255 -> [0, 1]) but the validation and test sets with no
transform at all, so their images reached the network as raw 0-255 values; the fix
gives the validation and test sets the same transform.
Re-created: a ResNet of BasicBlocks (conv-BN-ReLU, identity/1x1 shortcuts) with Kaiming
fan-in init of every conv and linear layer; SGD lr 1e-3, momentum 0.9, weight decay
5e-4; batch 32; cross-entropy over 10 classes; model.eval() for validation (as main.py);
differs from the original: ResNet-34 on 200x200 scene images replaced by a 3-stage
ResNet of 8/16/32 channels on seeded 3x16x16 colour images (10 classes, 3200 train,
640 val), generated as uint8-range values like decoded JPEGs; random rotation
augmentation left out; 200 steps instead of 30 epochs.
Fix: the validation loader gets the training transform (/255).  Run fixed:
FAILURELAB_FIX=1 or parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import accuracy, batched, fixed_from_env, generator  # noqa: E402

KIND = "failure"
STEPS = 200
HARM_METRIC = "val_acc"
CLASSES, SIDE = 10, 16


def images(seed: int, n: int):
    """Seeded colour images in 0-255: a class colour pattern plus noise."""
    g = generator(seed)
    patterns = torch.rand(CLASSES, 3, SIDE, SIDE, generator=g)
    patterns = F.avg_pool2d(patterns, 5, stride=1, padding=2)  # smooth blobs of colour
    patterns = (patterns - patterns.mean()) / patterns.std() * 0.3 + 0.5
    y = torch.randint(CLASSES, (n,), generator=g)
    x = (patterns[y] + 0.15 * torch.randn(n, 3, SIDE, SIDE, generator=g)).clamp(0, 1)
    return (x * 255).round(), y


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        identity = x if self.down is None else self.down(x)
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + identity)


def make_model() -> nn.Module:
    model = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                          BasicBlock(8, 8, 1), BasicBlock(8, 16, 2), BasicBlock(16, 32, 2),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, CLASSES))
    for m in model.modules():  # the repository's Kaiming initialisation
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.kaiming_normal_(m.weight, mode="fan_in")
    return model


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    x, y = images(seed, 3840)
    x_train = x[:3200] / 255  # transform=image_transform (ToTensor: 0-255 -> [0, 1])
    if fixed:
        x_val = x[3200:] / 255  # FIX: MyDataset(val_lines, transform=image_transform)
    else:
        x_val = x[3200:]  # BUG: MyDataset(val_lines) -- no transform, raw 0-255 pixels
    criterion = nn.CrossEntropyLoss()

    def step(model, optimizer, batch):
        batch_data, batch_label = batch
        optimizer.zero_grad()
        loss = criterion(model(batch_data), batch_label)
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=make_model,
                optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=1e-3, momentum=0.9,
                                                    weight_decay=5e-4),
                batches=batched(x_train, y[:3200], 32), step=step, loss=criterion,
                val_batches=batched(x_val, y[3200:], 320), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    """Accuracy on the validation loader as the program builds it (model.eval())."""
    return {"val_acc": accuracy(model, val_batches)}
