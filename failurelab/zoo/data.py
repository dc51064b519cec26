"""Synthetic data for the zoo: each family's inputs and a learnable teacher's targets,
generated from a `torch.Generator`, then the data faults applied to the training split.

Every generator returns standardised float features (or token ids) and targets, so
the healthy loop sees inputs the way a careful user prepares them.  The data faults
(`raw_decades`, `nan_rows`, `shuffled_rows`) undo one step of that preparation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

N_TRAIN, N_VAL = 1024, 256
PAD = 0  # token id of padding


@dataclass(frozen=True)
class Split:
    X: torch.Tensor
    y: torch.Tensor
    X_val: torch.Tensor
    y_val: torch.Tensor


def _split(X: torch.Tensor, y: torch.Tensor) -> Split:
    return Split(X[:N_TRAIN], y[:N_TRAIN], X[N_TRAIN:], y[N_TRAIN:])


def _teacher(X: torch.Tensor, g: torch.Generator, out: int, hidden: int = 16) -> torch.Tensor:
    """A random one-hidden-layer tanh network: smooth, non-linear, learnable."""
    d = X.shape[1]
    W1 = torch.randn(d, hidden, generator=g) / math.sqrt(d)
    W2 = torch.randn(hidden, out, generator=g) / math.sqrt(hidden)
    return torch.tanh(2 * X @ W1) @ W2


def images(g: torch.Generator, classes: int = 4) -> Split:
    """1x8x8 images: a noisy, randomly shifted copy of one of `classes` smooth templates."""
    n = N_TRAIN + N_VAL
    coarse = torch.randn(classes, 1, 4, 4, generator=g)
    templates = torch.nn.functional.interpolate(coarse, size=(8, 8), mode="bilinear")
    templates = templates / templates.std(dim=(1, 2, 3), keepdim=True)
    y = torch.randint(0, classes, (n,), generator=g)
    shifts = torch.randint(-1, 2, (n, 2), generator=g)
    X = torch.stack([templates[c].roll(tuple(s.tolist()), dims=(1, 2)) for c, s in zip(y, shifts, strict=True)])
    X = X + 0.8 * torch.randn(X.shape, generator=g)
    return _split((X - X.mean()) / X.std(), y)


def sequences(g: torch.Generator, length: int = 8, channels: int = 3) -> Split:
    """(N, T, C) sequences; the class says whether a decaying sum of a projection is > 0."""
    n = N_TRAIN + N_VAL
    X = torch.randn(n, length, channels, generator=g)
    w = torch.randn(channels, generator=g)
    decay = 0.8 ** torch.arange(length - 1, -1, -1, dtype=torch.float32)
    y = ((X @ w) * decay).sum(1).gt(0).long()
    return _split(X, y)


def tokens(g: torch.Generator, length: int = 10, vocab: int = 24, classes: int = 3,
           padded: bool = False) -> Split:
    """Token ids 1..vocab-1; every token votes for a class, the label is the majority.

    `padded`: real lengths vary from length/3 to length, the rest is PAD."""
    n = N_TRAIN + N_VAL
    X = torch.randint(1, vocab, (n, length), generator=g)
    if padded:
        lengths = torch.randint(length // 3, length + 1, (n, 1), generator=g)
        X = X.masked_fill(torch.arange(length) >= lengths, PAD)
    votes = torch.randn(vocab, classes, generator=g)
    votes[PAD] = 0
    y = votes[X].sum(1).argmax(1)
    return _split(X, y)


def features(g: torch.Generator, d: int = 10, kind: str = "classes",
             out: int = 3, hidden: int = 16) -> Split:
    """Gaussian features and a teacher network's classes, binary label or value."""
    n = N_TRAIN + N_VAL
    X = torch.randn(n, d, generator=g)
    t = _teacher(X, g, out, hidden)
    if kind == "classes":
        y = t.argmax(1)
    elif kind == "binary":
        y = t[:, :1].gt(t[:, :1].median()).float()  # (N, 1), balanced
    else:  # regression: the teacher's value plus a little noise, standardised
        v = t[:, 0] + 0.05 * torch.randn(n, generator=g)
        y = ((v - v.mean()) / v.std()).unsqueeze(1)  # (N, 1)
    return _split(X, y)


def low_rank(g: torch.Generator, d: int = 16, rank: int = 4) -> Split:
    """Features on a rank-`rank` subspace plus noise; the target is the input itself."""
    n = N_TRAIN + N_VAL
    X = torch.randn(n, rank, generator=g) @ torch.randn(rank, d, generator=g)
    X = X + 0.1 * torch.randn(n, d, generator=g)
    X = (X - X.mean(0)) / X.std(0)
    return _split(X, X)


def raw_units(X: torch.Tensor, X_val: torch.Tensor, decades: float, g: torch.Generator):
    """Undo the standardisation of train and val alike: feature (last dimension) j in
    units of 10^(decades * (j / (d - 1) - 1/2)), shifted by a few of those units
    (cents beside rates beside counts)."""
    d = X.shape[-1]
    exponents = decades * (torch.arange(d, dtype=torch.float32) / max(d - 1, 1) - 0.5)
    scale = 10.0 ** exponents[torch.randperm(d, generator=g)]
    offset = 3 * scale * torch.rand(d, generator=g)
    return X * scale + offset, X_val * scale + offset


def with_nan_rows(X: torch.Tensor, share: float, g: torch.Generator) -> torch.Tensor:
    """Put NaN into one feature of `share` of the rows (missing values in raw data)."""
    X = X.clone()
    rows = torch.randperm(len(X), generator=g)[:max(1, round(share * len(X)))]
    X.view(len(X), -1)[rows, 0] = float("nan")
    return X


def with_shuffled_rows(X: torch.Tensor, share: float, g: torch.Generator) -> torch.Tensor:
    """Shuffle X alone among `share` of the rows: those samples get another's label."""
    rows = torch.randperm(len(X), generator=g)[:round(share * len(X))]
    X = X.clone()
    X[rows] = X[rows[torch.randperm(len(rows), generator=g)]]
    return X
