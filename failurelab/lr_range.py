"""The learning-rate range test: sweep the rate log-uniformly, one batch per rate.

Starting from the initialised model, the rate grows geometrically every step while the
loss is recorded and smoothed.  Where the smoothed loss falls fastest the rate is
useful; where it passes 4x its best the rate has become destructive.  The model and
optimizer are restored afterwards, so the sweep can run on parts you then train.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from .faults import resolve
from .recipes import Recipe
from .train import Parts, build, endless_batches, torch_threads

START_LR, END_LR = 1e-5, 10.0  # the sweep's range, wide enough for SGD and Adam alike
SWEEP_STEPS = 100  # rates tried, one batch each
SMOOTHING = 0.05  # weight of the newest loss in the exponential moving average
DIVERGENCE = 4.0  # stop once the smoothed loss passes 4x its best (Lightning's rule)
SAFETY = 10.0  # suggest a tenth of the fastest-descent rate (the course: 1/3 to 1/10),
#               and never more than a tenth of where the loss blew up


@dataclass(frozen=True)
class LRRangeResult:
    table: pd.DataFrame  # lr, loss, smoothed_loss: one row per rate tried
    suggested_lr: float  # a tenth of the steepest-descent rate (or of divergence, if lower)
    steepest_lr: float  # where the smoothed loss fell fastest per decade of rate
    diverged_lr: float | None  # the rate at which the sweep stopped, if it did

    def plot(self, ax=None):
        """The sweep on a log-rate axis with the suggestion marked (see plots.lr_range)."""
        from .plots import lr_range

        return lr_range(self, ax=ax)


def lr_range_test(recipe_or_parts: Recipe | str | Parts, seed: int = 0, *,
                  start: float = START_LR, end: float = END_LR,
                  steps: int = SWEEP_STEPS) -> LRRangeResult:
    """Sweep the learning rate for a recipe (or for parts you built) and suggest one."""
    if not (0 < start < end) or steps < 5:
        raise ValueError(f"need 0 < start < end and at least 5 steps; got start={start}, "
                         f"end={end}, steps={steps}")
    parts = recipe_or_parts if isinstance(recipe_or_parts, Parts) else \
        build(resolve(recipe_or_parts), seed)
    saved = copy.deepcopy((parts.model.state_dict(), parts.optimizer.state_dict()))
    try:
        with torch_threads(1), torch.random.fork_rng():
            torch.manual_seed(seed)
            table, stopped_at = _sweep(parts, np.geomspace(start, end, steps))
    finally:
        parts.model.load_state_dict(saved[0])
        parts.optimizer.load_state_dict(saved[1])
    return _suggest(table, stopped_at)


def _sweep(parts: Parts, rates: np.ndarray) -> tuple[pd.DataFrame, float | None]:
    """Loss per rate, and the rate at which the loss blew up (None: it never did)."""
    model, optimizer, loss_fn = parts.model, parts.optimizer, parts.loss_fn
    batches = endless_batches(parts.train_loader)
    rows, average, best = [], 0.0, math.inf
    model.train()
    for i, lr in enumerate(rates):
        for group in optimizer.param_groups:
            group["lr"] = float(lr)
        X, y = next(batches)
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(X).float(), y)
        loss.backward()
        optimizer.step()
        value = loss.item()
        if not math.isfinite(value):
            return _table(rows), float(lr)
        average = SMOOTHING * value + (1 - SMOOTHING) * average
        smoothed = average / (1 - (1 - SMOOTHING) ** (i + 1))  # bias-corrected
        rows.append((float(lr), value, smoothed))
        best = min(best, smoothed)
        if smoothed > DIVERGENCE * best:
            return _table(rows), float(lr)
    return _table(rows), None


def _table(rows) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["lr", "loss", "smoothed_loss"])


def _suggest(table: pd.DataFrame, diverged: float | None) -> LRRangeResult:
    if len(table) < 3:
        raise ValueError("the loss turned non-finite within the first rates of the sweep; "
                         "lower `start`")
    log_lr = np.log10(table["lr"].to_numpy())
    smooth = table["smoothed_loss"].to_numpy()
    best = int(np.argmin(smooth))
    slope = np.gradient(smooth[:best + 1], log_lr[:best + 1]) if best >= 2 else np.zeros(1)
    steepest = float(table["lr"].iloc[int(np.argmin(slope))])
    suggested = min(steepest, diverged) / SAFETY if diverged else steepest / SAFETY
    return LRRangeResult(table, suggested, steepest, diverged)
