"""A CIFAR-10 classifier "fails to train after ~3 epochs": __getitem__ normalises the stored images in place.

Source: https://github.com/facebookresearch/pycls/pull/21 (2020-01-08), on
pycls/datasets/cifar10.py.
Root cause (as the PR established it): Cifar10.__getitem__ takes `self._inputs[index]`, a
view of the loaded dataset, and its preparation normalises colours in place
(`im[i] = im[i] - mean[i]; im[i] = im[i] / std[i]`), so every access normalises the
STORED image again.  With worker processes each epoch works on a fresh copy and the bug
hides; with DATA_LOADER.NUM_WORKERS=0 the stored images are re-normalised every epoch,
their contrast shrinks by the standard deviation (about 63) each time, and "the model
fails to train after ~3 epochs".  The fix copies the selected image in __getitem__.
(Outside the catalogue: an in-place operation on the stored data.)
Re-created: the dataset's preparation -- pixels 0..255, colour normalisation with
pycls's CIFAR means (125.3, 123.0, 113.9) and standard deviations (63.0, 62.1, 66.7)
written in place on the indexed view, random horizontal flip -- a DataLoader with
num_workers=0 and shuffling, cross-entropy, SGD lr 0.1 momentum 0.9 weight decay 5e-4
(pycls's CIFAR defaults), batch 128;
differs from the original: CIFAR-10 replaced by seeded 3x16x16 colour images (3200
training, 640 test) and ResNet-56 by a 2-conv CNN with batch norm; pycls's zero-padded
random crop left out; the loader's 8 epochs are drawn before training (each batch a
snapshot of what the loader returned in its epoch), 200 steps; the test images are
prepared once.
Fix: copy the indexed image before normalising.  Run fixed: FAILURELAB_FIX=1.
"""
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import accuracy, fixed_from_env, generator  # noqa: E402

KIND = "failure"
STEPS = 200
HARM_METRIC = "val_acc"
CLASSES, SIDE, BATCH, EPOCHS = 10, 16, 128, 8
N_TRAIN, N_TEST = 3200, 640
MEAN = torch.tensor([125.3, 123.0, 113.9]).view(3, 1, 1)
SD = torch.tensor([63.0, 62.1, 66.7]).view(3, 1, 1)


def raw_images(seed: int, n: int):
    """Seeded 0..255 colour images: a smooth pattern per class plus noise."""
    g = generator(seed)
    patterns = F.avg_pool2d(torch.rand(CLASSES, 3, SIDE, SIDE, generator=g), 5, 1, 2)
    patterns = (patterns - patterns.mean()) / patterns.std()
    y = torch.randint(CLASSES, (n,), generator=g)
    x = 120 + 40 * patterns[y] + 40 * torch.randn(n, 3, SIDE, SIDE, generator=g)
    return x.clamp(0, 255), y


class Cifar10(Dataset):
    def __init__(self, inputs, labels, train: bool, fixed: bool, seed: int):
        self._inputs, self._labels = inputs, labels
        self._train, self._fixed = train, fixed
        self._g = generator(seed + 1)

    def _prepare_im(self, im):
        for i in range(3):  # transforms.color_norm: in place
            im[i] = im[i] - MEAN[i]
            im[i] = im[i] / SD[i]
        if self._train and torch.rand(1, generator=self._g) < 0.5:
            im = im.flip(-1)  # horizontal flip
        return im

    def __getitem__(self, index):
        if self._fixed:
            im = self._inputs[index, ...].clone()  # FIX: a copy of the stored image
        else:
            im = self._inputs[index, ...]  # BUG: a view: the stored image is normalised again
        return self._prepare_im(im), self._labels[index]

    def __len__(self):
        return len(self._inputs)


def make_model() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32),
                         nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, CLASSES))


def parts(fixed: bool | None = None, seed: int = 0) -> dict:
    fixed = fixed_from_env() if fixed is None else fixed
    x, y = raw_images(seed, N_TRAIN + N_TEST)
    train_set = Cifar10(x[:N_TRAIN].clone(), y[:N_TRAIN], True, fixed, seed)
    loader = DataLoader(train_set, batch_size=BATCH, shuffle=True, num_workers=0,
                        generator=generator(seed))
    batches = [batch for _ in range(EPOCHS) for batch in loader]  # epoch after epoch
    test_set = Cifar10(x[N_TRAIN:].clone(), y[N_TRAIN:], False, True, seed)
    val = list(DataLoader(test_set, batch_size=320))
    criterion = nn.CrossEntropyLoss()

    def step(model, optimizer, batch):
        inputs, labels = batch
        preds = model(inputs)
        loss = criterion(preds, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return dict(model=make_model,
                optimizer=lambda m: torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9,
                                                    weight_decay=5e-4),
                batches=batches, step=step, loss=criterion, val_batches=val,
                steps=STEPS, seed=seed)


def measure(model, val_batches, fixed: bool) -> dict:
    return {"val_acc": accuracy(model, val_batches)}
