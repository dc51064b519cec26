"""A VGG16-BN task model is tested while still in training mode (dropout and batch statistics on).

Source: https://github.com/sinhasam/vaal/issues/2 (2019-09-03); fixed by the author the same
day in commit 547b46b ("fixing bug in evaluation").
Root cause (as the issue pointed out and the author confirmed): Solver.test() computed the
test accuracy without task_model.eval(), so the VGG16-BN's two Dropout(0.5) layers were
still dropping units and its BatchNorm layers normalised with the statistics of each test
batch; the fix adds task_model.eval() at the top of test().
Re-created: a VGG-style network with batch norm (conv-BN-ReLU blocks with max-pooling,
then the VGG classifier Linear-ReLU-Dropout(0.5)-Linear-ReLU-Dropout(0.5)-Linear),
cross-entropy, Adam lr 5e-4, batch 128 for training and testing, accuracy measured once
on the test set as Solver.test() does;
differs from the original: VGG16-BN on CIFAR-10 replaced by three conv blocks of 16/32/64
channels on seeded 3x16x16 colour images (10 classes, 2560 labelled training images,
1280 test images), classifier of 128 units instead of 4096; no VAE or discriminator
(the bug is in the task model's test; the adversarial sampling only decides which images
are labelled); image noise strong enough that the fixed model's test accuracy stays
well below 100 %, as on CIFAR-10 with a small labelled budget; 150 steps instead of
100000 iterations.
Fix: task_model.eval() before testing.  Run fixed: FAILURELAB_FIX=1 or parts(fixed=True).
"""
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import batched, fixed_from_env, generator  # noqa: E402

KIND = "failure"
STEPS = 150
HARM_METRIC = "val_acc"
CLASSES, SIDE = 10, 16


def images(seed: int, n: int):
    """Seeded colour images in [0, 1]: a smooth class pattern plus noise."""
    g = generator(seed)
    patterns = F.avg_pool2d(torch.rand(CLASSES, 3, SIDE, SIDE, generator=g), 5, 1, 2)
    patterns = (patterns - patterns.mean()) / patterns.std() * 0.3 + 0.5
    y = torch.randint(CLASSES, (n,), generator=g)
    return (patterns[y] + 0.8 * torch.randn(n, 3, SIDE, SIDE, generator=g)).clamp(0, 1), y


def make_model() -> nn.Module:
    def block(cin, cout):
        return [nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(),
                nn.MaxPool2d(2)]
    return nn.Sequential(*block(3, 16), *block(16, 32), *block(32, 64), nn.Flatten(),
                         nn.Linear(64 * 2 * 2, 128), nn.ReLU(), nn.Dropout(),
                         nn.Linear(128, 128), nn.ReLU(), nn.Dropout(),
                         nn.Linear(128, CLASSES))


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    x, y = images(seed, 3840)
    ce_loss = nn.CrossEntropyLoss()

    def step(task_model, optim_task_model, batch):
        labeled_imgs, labels = batch
        preds = task_model(labeled_imgs)
        task_loss = ce_loss(preds, labels)
        optim_task_model.zero_grad()
        task_loss.backward()
        optim_task_model.step()
        return task_loss

    return dict(model=make_model,
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=5e-4),
                batches=batched(x[:2560], y[:2560], 128), step=step, loss=ce_loss,
                val_batches=batched(x[2560:], y[2560:], 128), steps=STEPS, seed=seed)


def measure(task_model, test_dataloader, fixed: bool) -> dict:
    """Solver.test(): the test accuracy as the program computes it."""
    was = task_model.training
    if fixed:
        task_model.eval()  # FIX: task_model.eval() before testing
    # BUG: no task_model.eval(): dropout and batch statistics stay on during the test
    total = correct = 0
    for imgs, labels in test_dataloader:
        with torch.no_grad():
            preds = task_model(imgs)
        correct += int((preds.argmax(1) == labels).sum())
        total += len(labels)
    task_model.train(was)
    return {"val_acc": correct / total}
