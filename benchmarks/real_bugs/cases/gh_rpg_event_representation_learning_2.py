"""An event-camera classifier trains well but validates near chance: the splits number classes differently.

Source: https://github.com/uzh-rpg/rpg_event_representation_learning/issues/2 (comment of
2022-10-08, confirmed by a second user on 2023-03-30); the repository later passes the
training classes to the other splits (`NCaltech101(flags.validation_dataset,
classes=training_dataset.classes)`).
Root cause (as the thread established it): `NCaltech101.__init__` numbers the classes in
the order `os.listdir(root)` returns the class folders, separately for the training and
the validation folder (main.py of 2021: `NCaltech101(flags.validation_dataset)`), and
listdir's order is arbitrary, so class i in training is a different class in validation.
With a consistent mapping (sorted class names, or the training list passed on) the
reporter's accuracy went from low to 85% on the test set.
Re-created: the training loop of main.py -- Adam lr 1e-4, cross-entropy, batch 4,
model.train() for training and model.eval() + no_grad for validation -- on a classifier
of event histograms (two polarity channels); the class list of each split is the order
its folder listing returns (a seeded permutation of the class names, one per split);
differs from the original: N-Caltech101 event files replaced by seeded event-count
histograms of 10 classes on a 2x24x32 grid (Poisson counts, rate 3.2 on a per-class
half of the cells, 0.2 elsewhere);
the learnt quantization layer and the pretrained ResNet-34 replaced by a 3-block conv
net with batch norm; no augmentation; 300 steps instead of 30 epochs.
Fix: number the validation classes with the training list.  Run fixed: FAILURELAB_FIX=1.
"""
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import batched, fixed_from_env, generator  # noqa: E402

KIND = "failure"
STEPS = 300
HARM_METRIC = "val_acc"
CLASSES, H, W = 10, 24, 32
NAMES = [f"class_{k:03d}" for k in range(CLASSES)]


def recordings(seed: int):
    """Event histograms per class name, for the training and the validation folder."""
    g = generator(seed)
    blobs = F.avg_pool2d(torch.rand(CLASSES, 2, H, W, generator=g), 5, 1, 2)
    rates = 0.2 + 3.0 * (blobs > blobs.flatten(1).median(1).values[:, None, None, None])

    def folder(n_per_class):
        return {name: torch.poisson(rates[k].expand(n_per_class, 2, H, W).contiguous(),
                                    generator=g)
                for k, name in enumerate(NAMES)}

    listing_train = [NAMES[i] for i in torch.randperm(CLASSES, generator=g)]
    listing_val = [NAMES[i] for i in torch.randperm(CLASSES, generator=g)]
    return folder(120), listing_train, folder(40), listing_val


def dataset(folder: dict, classes: list):
    """NCaltech101: class i is the i-th name of `classes`; its files get label i."""
    xs, ys = [], []
    for i, c in enumerate(classes):
        xs.append(folder[c])
        ys += [i] * len(folder[c])
    return torch.cat(xs), torch.tensor(ys)


def make_model() -> nn.Module:
    def block(cin, cout):
        return [nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(),
                nn.MaxPool2d(2)]
    return nn.Sequential(*block(2, 16), *block(16, 32), *block(32, 64),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, CLASSES))


def cross_entropy_loss(pred_labels, labels):
    return F.cross_entropy(pred_labels, labels)


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    train_folder, train_listing, val_folder, val_listing = recordings(seed)
    x_train, y_train = dataset(train_folder, train_listing)
    if fixed:
        x_val, y_val = dataset(val_folder, train_listing)  # FIX: the training class list
    else:
        x_val, y_val = dataset(val_folder, val_listing)  # BUG: the folder's own listdir order
    order = torch.randperm(len(x_train), generator=generator(seed + 1))  # loader shuffle
    x_train, y_train = x_train[order], y_train[order]

    def step(model, optimizer, batch):
        events, labels = batch
        model.train()
        optimizer.zero_grad()
        pred_labels = model(events)
        loss = cross_entropy_loss(pred_labels, labels)
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=make_model,
                optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-4),
                batches=batched(x_train, y_train, 4), step=step, loss=cross_entropy_loss,
                val_batches=batched(x_val, y_val, 40), steps=STEPS, seed=seed)


def measure(model, validation_batches, fixed: bool) -> dict:
    """The validation accuracy main.py prints: eval mode, no gradients."""
    model.eval()
    right = total = 0
    with torch.no_grad():
        for events, labels in validation_batches:
            right += int((model(events).argmax(1) == labels).sum())
            total += len(labels)
    model.train()
    return {"val_acc": right / total}
