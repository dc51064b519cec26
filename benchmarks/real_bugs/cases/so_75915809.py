"""Control: "accuracy value more than 1" for a binary classifier trained with BCEWithLogitsLoss.

Source: https://stackoverflow.com/questions/75915809; code as reproduced in
mehilshah/Bug_Reproducibility_DL_Bugs, Bugs/066 (commit 11b01d6).
Root cause (as the reproduction shows): a reporting bug, not a training bug.  The model
has one output logit; `_, preds = torch.max(outputs, 1)` is always 0, and comparing the
(N,) predictions with the (N, 1) unsqueezed labels broadcasts to (N, N), so the count of
"correct" predictions can exceed N.  Training itself (fine-tuning with
BCEWithLogitsLoss) is healthy; the fix changes only the accuracy line.
Re-created: a classifier with a single-logit head, BCEWithLogitsLoss, SGD lr 1e-3
momentum 0.9, batch 4, labels unsqueezed to (N, 1) as in the post;
differs from the original: a small CNN on seeded 3x32x32 two-class images instead of a
pretrained ResNet-18 on the 244 hymenoptera images; StepLR(7 epochs) left out (150 steps
are fewer than its first step); 150 steps.
Fix: preds = (outputs > 0) compared with the labels of the same shape.  FAILURELAB_FIX=1.
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import batched, fixed_from_env, generator  # noqa: E402

KIND = "control"
STEPS = 150
HARM_METRIC = "train_loss"


def images(seed: int, n: int):
    g = generator(seed)
    pattern = torch.randn(2, 3, 32, 32, generator=g)
    y = torch.randint(2, (n,), generator=g)
    return pattern[y] + 2.0 * torch.randn(n, 3, 32, 32, generator=g), y


def make_model() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(4),
                         nn.Flatten(), nn.Linear(8 * 8 * 8, 1))


def running_corrects(outputs, labels, fixed: bool) -> int:
    """The user's accuracy count (not part of training)."""
    if fixed:
        preds = (outputs > 0).long()  # FIX: threshold the single logit
    else:
        _, preds = torch.max(outputs, 1)  # BUG: argmax over one column, broadcast vs (N, 1)
    return int(torch.sum(preds == labels))


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    x, y = images(seed, 400)
    criterion = nn.BCEWithLogitsLoss()

    def step(model, optimizer, batch):
        inputs, labels = batch
        labels = labels.unsqueeze(1)
        optimizer.zero_grad()
        outputs = model(inputs)
        loss = criterion(outputs, labels.float())
        loss.backward()
        optimizer.step()
        step.corrects = running_corrects(outputs.detach(), labels, fixed)
        return loss

    return dict(model=make_model,
                optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=1e-3, momentum=0.9),
                batches=batched(x[:300], y[:300], 4), step=step,
                loss=lambda out, lab: criterion(out, lab.unsqueeze(1).float()),
                val_batches=batched(x[300:], y[300:], 100), steps=STEPS, seed=seed)
