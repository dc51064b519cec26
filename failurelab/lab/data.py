"""The two synthetic tasks, generated from the seed: no files, no downloads.

Both datasets are *stored sorted by class*, like records exported one class at a time,
so that the loader's shuffling is a real, visible duty of the pipeline.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    Dataset,
    RandomSampler,
    SequentialSampler,
    WeightedRandomSampler,
)

N_FEATURES = 16
N_CLASSES = 3
VOCAB = 11  # real tokens are 1..VOCAB; 0 is the pad token
PAD = 0
SEQ_LEN = 40  # every sequence is padded to this length
MIN_REAL, MAX_REAL = 4, 20  # real (unpadded) lengths
SEQ_CLASSES = 2
VALUE_NOISE = 0.1  # std of the noise on a regression target whose own std is 1

# How the 16 raw tabular features are scaled, as in transaction data: what a model sees
# when nobody standardises.  (offset, scale) applied to a standard-normal latent.
_FEATURE_UNITS = [
    (200_000.0, 80_000.0),  # amount, in cents: a $2,000 purchase is 200000
    (0.0, 1e-3),  # a rate, as a tiny fraction
    (40.0, 12.0),  # an age in years
    (30.0, 10.0),  # a count of events
] + [(0.0, 1.0)] * 12  # already-standardised scores


@dataclass(frozen=True)
class Prepared:
    """What the loop trains on: training tensors in storage order, and validation."""

    X_train: torch.Tensor  # raw training features (tabular) or tokens (sequence)
    y_train: torch.Tensor
    X_val: torch.Tensor  # validation inputs, already preprocessed
    y_val: torch.Tensor
    mean: torch.Tensor | None  # training statistics used to standardise, if any
    std: torch.Tensor | None


def make_tabular(seed: int, n_train: int, n_val: int, target: str = "classes"):
    """Raw features and labels from a random linear teacher on standard-normal latents.

    `target="value"`: the teacher's first score, scaled to std 1, plus a little noise (a
    separate generator, so the features are the classification task's): a regression
    whose targets a model can fit to about the noise, 1% of their variance."""
    gen = torch.Generator().manual_seed(seed)
    teacher = torch.randn(N_FEATURES, N_CLASSES, generator=gen)
    latent = torch.randn(n_train + n_val, N_FEATURES, generator=gen)
    if target == "value":
        noise = torch.Generator().manual_seed(seed + 3)
        score = latent @ teacher[:, 0] / teacher[:, 0].norm()
        y = score + VALUE_NOISE * torch.randn(len(score), generator=noise)
    else:
        y = (latent @ teacher).argmax(1)
    offset = torch.tensor([u[0] for u in _FEATURE_UNITS])
    scale = torch.tensor([u[1] for u in _FEATURE_UNITS])
    X = latent * scale + offset
    return X[:n_train], y[:n_train], X[n_train:], y[n_train:]


def make_sequence(seed: int, n_train: int, n_val: int):
    """Token sequences padded with 0; label 1 when the mean real token exceeds the middle."""
    gen = torch.Generator().manual_seed(seed)
    n = n_train + n_val
    tokens = torch.randint(1, VOCAB + 1, (n, SEQ_LEN), generator=gen)
    lengths = torch.randint(MIN_REAL, MAX_REAL + 1, (n,), generator=gen)
    is_pad = torch.arange(SEQ_LEN) >= lengths[:, None]
    tokens = tokens.masked_fill(is_pad, PAD)
    mean_token = tokens.sum(1) / lengths
    y = (mean_token > (VOCAB + 1) / 2).long()
    return tokens[:n_train], y[:n_train], tokens[n_train:], y[n_train:]


@functools.lru_cache(maxsize=64)
def _raw(task: str, seed: int, n_train: int, n_val: int, target: str = "classes"):
    if task == "tabular":
        return make_tabular(seed, n_train, n_val, target)
    return make_sequence(seed, n_train, n_val)


def sorted_by_class(X: torch.Tensor, y: torch.Tensor):
    """The storage order: all of class 0, then class 1, ... (stable within a class);
    regression targets from the smallest to the largest."""
    order = torch.sort(y, stable=True).indices
    return X[order], y[order]


def prepare(recipe, seed: int) -> Prepared:
    """Generate the task for `seed` and apply the recipe's data switches to training only."""
    X, y, X_val, y_val = _raw(recipe.task, seed, recipe.n_train, recipe.n_val, recipe.target)
    gen = torch.Generator().manual_seed(seed + 2)
    if recipe.leak_label:  # a column filled in after the outcome, e.g. "case closed as"
        X, X_val = _with_outcome_column(X, y), _with_outcome_column(X_val, y_val)
    X, y = _keep_minority(X, y, recipe.minority_fraction)
    if recipe.nan_rows:
        rows = torch.randperm(len(y), generator=gen)[: recipe.nan_rows]
        X = X.clone()
        X[rows, 0] = float("nan")  # a missing amount, as an empty CSV cell parses
    if recipe.impute_missing:
        X = torch.where(torch.isnan(X), X.nanmedian(0).values, X)
    if recipe.labels == "shuffled":
        y = y[torch.randperm(len(y), generator=gen)]
    if recipe.train_label_shift:
        y = (y + recipe.train_label_shift) % int(y_val.max() + 1)
    mean = std = None
    if recipe.task == "tabular" and recipe.normalize_inputs:
        mean, std = _nan_mean_std(X)  # like pandas: missing values are skipped
        if recipe.normalize_val:  # forget this and validation arrives in raw units
            X_val = (X_val - mean) / std
    X, y = sorted_by_class(X, y)
    return Prepared(X, y, X_val, y_val, mean, std)


def _with_outcome_column(X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """X with its last feature replaced by the class code: a value that exists only once
    the outcome is known, so it cannot be used at decision time."""
    X = X.clone()
    X[:, -1] = y.to(X.dtype)
    return X


def _keep_minority(X, y, fraction: float):
    """Keep every sample of class 0 and the first `fraction` of each other class."""
    if fraction >= 1.0:
        return X, y
    keep = y == 0
    for c in range(1, int(y.max()) + 1):
        where = torch.nonzero(y == c).flatten()
        keep[where[: max(1, round(fraction * len(where)))]] = True
    return X[keep], y[keep]


def _nan_mean_std(X: torch.Tensor):
    mean = X.nanmean(0)
    std = (X - mean).pow(2).nanmean(0).sqrt()
    return mean, std


class BatchedData(Dataset):
    """Indexing with a whole list of indices returns a batch in one tensor operation."""

    def __init__(self, X: torch.Tensor, y: torch.Tensor):
        self.X, self.y = X, y

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, indices):
        return self.X[indices], self.y[indices]


class PerSampleData(Dataset):
    """Rows kept as CSV text lines, parsed and standardised one sample at a time.

    This is how many hand-written pipelines look, and why their data loading dominates
    the step time of a small model.  `repr` round-trips every float exactly and the
    arithmetic is the batched path's float32 arithmetic, so the batches (and hence the
    loss curve) are bitwise identical to the fast path: only the time differs.
    """

    def __init__(self, X_raw: torch.Tensor, y: torch.Tensor, mean, std):
        self.lines = [",".join(map(repr, row)) for row in X_raw.tolist()]
        self.labels = y.tolist()
        self.dtype = X_raw.dtype
        self.mean, self.std = mean, std

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i):
        x = torch.tensor([float(v) for v in self.lines[i].split(",")], dtype=self.dtype)
        if self.mean is not None:
            x = (x - self.mean) / self.std
        return x, torch.tensor(self.labels[i])


def make_loader(dataset: Dataset, batch_size: int, shuffle: bool, seed: int, per_sample: bool,
                balanced: bool = False):
    """A DataLoader whose batch order depends only on `seed`.

    `balanced` draws samples with replacement, each class equally often (rare classes
    are repeated): the usual repair for a training set dominated by one class.
    """
    gen = torch.Generator().manual_seed(seed + 1)
    if balanced:
        labels = torch.as_tensor(dataset.labels if per_sample else dataset.y)
        weights = (1.0 / torch.bincount(labels).double())[labels]
        sampler = WeightedRandomSampler(weights, len(labels), replacement=True, generator=gen)
    elif shuffle:
        sampler = RandomSampler(dataset, generator=gen)
    else:
        sampler = SequentialSampler(dataset)
    batches = BatchSampler(sampler, batch_size, drop_last=True)
    if per_sample:
        return DataLoader(dataset, batch_sampler=batches)
    return DataLoader(dataset, sampler=batches, batch_size=None)
