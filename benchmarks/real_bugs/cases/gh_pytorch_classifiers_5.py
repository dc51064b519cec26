"""Control: "Acc is 0" after 50 epochs of transfer learning -- the accuracy was integer-divided.

Source: https://github.com/prakashjayy/pytorch_classifiers/issues/5 (2019-09-24), on
tars/tars_training.py (commit 036e6f9).
What the thread established: nothing is wrong with training ("train Loss: 0.0236 Acc:
0.0000").  train_model sums `torch.sum(preds == labels.data)` into `running_corrects`,
an integer tensor, and divides it by the dataset size; in the PyTorch of the time an
integer tensor divided by an int was floor division, so every printed accuracy is 0.
The fix a user found: `running_corrects += float(torch.sum(preds == labels.data))`.
(The printed loss is small for a second, unrelated reason: batch-mean losses summed and
divided by the number of samples.)  The model and its updates are unchanged by either.
Healthy training: the fix changes only the printed numbers.
Re-created: tars_train.py's defaults -- a pretrained ResNet-18 with its layers frozen and
a new Linear(512, classes) head, CrossEntropyLoss, SGD lr 0.001 momentum 0.9 over the
trainable parameters, batch 64 -- with the epoch statistics computed as train_model does;
differs from the original: the frozen ResNet-18 replaced by fixed seeded 512-d pooled
features (non-negative, as after ReLU and average pooling) for 12 plant classes, 3200
training and 640 validation images; 300 steps (6 epochs), so StepLR(step_size=7) never
fires and is left out; the old floor division is written as `//` (today's `/` on an
integer tensor is true division).
Fix (to the printout only): float(...) around the count.  Run: FAILURELAB_FIX=1.
"""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import accuracy, batched, fixed_from_env, generator  # noqa: E402

KIND = "control"
STEPS = 300
HARM_METRIC = "val_acc"
CLASSES, FEATURES = 12, 512
N_TRAIN, N_VAL, BATCH = 3200, 640, 64


def pooled_features(seed: int, n: int):
    g = generator(seed)
    centres = torch.randn(CLASSES, 32, generator=g)
    spread = torch.randn(32, FEATURES, generator=g) / 32 ** 0.5
    y = torch.randint(CLASSES, (n,), generator=g)
    z = centres[y] + 1.0 * torch.randn(n, 32, generator=g)
    return torch.relu(z @ spread), y


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    X, y = pooled_features(seed, N_TRAIN + N_VAL)
    criterion = nn.CrossEntropyLoss()
    epoch = {"loss": 0.0, "corrects": torch.tensor(0), "seen": 0, "printed": []}

    def step(model, optimizer, batch):
        inputs, labels = batch
        optimizer.zero_grad()
        outputs = model(inputs)
        _, preds = torch.max(outputs.data, 1)
        loss = criterion(outputs, labels)
        loss.backward()
        optimizer.step()
        epoch["loss"] += loss.item()  # running_loss += loss.data[0]
        if fixed:
            epoch["corrects"] = epoch["corrects"] + float(torch.sum(preds == labels.data))  # FIX
        else:
            epoch["corrects"] = epoch["corrects"] + torch.sum(preds == labels.data)  # BUG: integer count
        epoch["seen"] += len(labels)
        if epoch["seen"] >= N_TRAIN:  # the epoch's printout
            acc = (epoch["corrects"] / N_TRAIN if fixed
                   else epoch["corrects"] // N_TRAIN)  # old integer-tensor division
            epoch["printed"].append((epoch["loss"] / N_TRAIN, float(acc)))
            epoch.update(loss=0.0, corrects=torch.tensor(0), seen=0)
        return loss

    return dict(model=lambda: nn.Linear(FEATURES, CLASSES),
                optimizer=lambda m: torch.optim.SGD(
                    [p for p in m.parameters() if p.requires_grad], lr=0.001, momentum=0.9),
                batches=batched(X[:N_TRAIN], y[:N_TRAIN], BATCH), step=step, loss=criterion,
                val_batches=batched(X[N_TRAIN:], y[N_TRAIN:], BATCH), steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_acc": accuracy(model, val_batches)}
