"""The learning-rate range test: sweep the rate log-uniformly, one batch per rate.

Starting from the model as it is, the rate grows geometrically every step while the
loss is recorded.  The sweep stops where the loss turns non-finite or its running
average passes 4x its best (Lightning's rule: the rate has become destructive).  The
model, optimizer, gradients, train/eval modes and RNG are restored afterwards, so the
sweep can run on parts you then train: a lab recipe, `fl.build`'s parts, your own
`(model, optimizer, loss_fn, batches)` or any object with those attributes (such as
a zoo loop with `next_batch(step)`).  How the rate is chosen: see `suggest`.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from ..basics.recipes import Recipe, baseline
from .train import Parts, build, torch_threads

START_LR, END_LR = 1e-5, 10.0  # the sweep's range, wide enough for SGD and Adam alike
SWEEP_STEPS = 100  # rates tried, one batch each: 100 over 6 decades is ~17 per decade
SMOOTHING = 0.05  # weight of the newest loss in the running average the stop rule reads
DIVERGENCE = 4.0  # stop once that average passes 4x its best (Lightning's rule)
WINDOW_DECADES = 0.25  # centred running-median window for choosing the rate (see `suggest`)
SEARCH_DECADES = 2.0  # the steepest descent is sought within 2 decades below the minimum
EDGE_SAFETY = 5.0  # suggest a fifth of the rate at the smoothed loss's minimum (the edge)
NORMALISED_EDGE_SAFETY = 10.0  # ...a tenth for optimizers whose steps are normalised
# Optimizers that divide each step by a running gradient scale (their steps do not shrink
# as the gradients do), by class or by the state they keep:
_NORMALISED = (torch.optim.Adam, torch.optim.AdamW, torch.optim.Adamax, torch.optim.NAdam,
               torch.optim.RAdam, torch.optim.RMSprop, torch.optim.Adagrad,
               torch.optim.Adadelta, torch.optim.SparseAdam)
_NORMALISING_STATE = ("exp_avg_sq", "square_avg", "exp_inf", "sum", "acc_delta")


@dataclass(frozen=True)
class LRRangeResult:
    table: pd.DataFrame  # lr, loss, smoothed_loss: one row per rate tried
    suggested_lr: float  # minimum_lr / EDGE_SAFETY (or NORMALISED_EDGE_SAFETY): see `suggest`
    steepest_lr: float  # where the smoothed loss fell fastest per decade of rate
    diverged_lr: float | None  # the rate at which the sweep stopped, if it did
    minimum_lr: float = math.nan  # where the smoothed loss was lowest
    #   drawn by `fl.plots.lr_range(result)`: the loop's floor computes, views draw


@dataclass
class _Subject:
    """What a sweep needs, whatever it was given."""

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    loss_fn: Callable
    next_batch: Callable[[int], tuple]  # step -> (x, y)


def lr_range_test(recipe_or_parts, seed: int = 0, *, start: float = START_LR,
                  end: float = END_LR, steps: int = SWEEP_STEPS) -> LRRangeResult:
    """Sweep the learning rate and suggest one that trains.

    `recipe_or_parts`: a Recipe or task name (built with `seed`; `fl.lr_range_test`
    also takes a fault's name), `fl.build`'s Parts,
    a tuple `(model, optimizer, loss_fn, batches)` where `batches` is a re-iterable of
    `(x, y)` (a list, a DataLoader) or a function `step -> (x, y)`, or any object with
    `model`, `optimizer`, `loss_fn` and `next_batch(step)`.  `seed` also seeds the
    sweep's own random draws (dropout).  Everything the sweep touches is restored.
    """
    if not (0 < start < end) or steps < 5:
        raise ValueError(f"need 0 < start < end and at least 5 steps; got start={start}, "
                         f"end={end}, steps={steps}")
    subject = _subject(recipe_or_parts, seed)
    saved = _save(subject)
    try:
        with torch_threads(1), torch.random.fork_rng():
            torch.manual_seed(seed)
            table, stopped_at = _sweep(subject, np.geomspace(start, end, steps))
        safety = NORMALISED_EDGE_SAFETY if _normalised(subject.optimizer) else EDGE_SAFETY
    finally:
        _restore(subject, saved)
    return suggest(table, stopped_at, safety)


def _normalised(optimizer: torch.optim.Optimizer) -> bool:
    """Does the optimizer divide its steps by a running gradient scale (Adam, RMSprop,
    ...)?  Known by class, or by the state it kept during the sweep."""
    if isinstance(optimizer, _NORMALISED):
        return True
    return any(key in state for state in optimizer.state.values() for key in _NORMALISING_STATE)


def suggest(table: pd.DataFrame, diverged: float | None = None,
            safety: float = EDGE_SAFETY) -> LRRangeResult:
    """Choose a rate from a sweep (`table`: lr and loss, one row per rate, increasing).

    1. Smooth the loss with a centred running median over a quarter decade: one
       batch's loss is noisy (on small batches +-20 % from batch to batch at rates that
       change nothing), a median ignores a single easy or hard batch, and a centred
       window does not lag the rate the way a running average does.
    2. The minimum of the smoothed loss marks the edge of stability: below it a larger
       rate still buys more descent per step, above it steps overshoot.  The lowest
       point of a smoothed curve is robust; the steepest slope, a derivative of noisy
       data, is not (with one batch per rate it landed on batch noise at 1e-5 and
       suggested 1e-6, which does not train).
    3. Suggest the rate at the minimum divided by `safety` (EDGE_SAFETY, 5; for
       optimizers with normalised steps NORMALISED_EDGE_SAFETY, 10).  The sweep holds
       each rate for one step; a run holds it for hundreds while momentum or Adam's
       moments build up and the weights move into sharper regions, so the rate a run
       sustains sits below the edge the sweep touched for a moment.  SGD's steps shrink
       with the gradient as training converges, which steadies it near the edge; Adam's
       and RMSprop's are normalised and do not shrink, so they need the wider margin
       (measured: GRU + Adam at a fifth of its minimum, 14x its tuned rate, removed
       0.55 of the tuned run's loss drop at 0.140 and 0.40 at 0.141, the edge itself;
       SGD at a tenth stalled in two families).  The steepest descent is still
       reported (sought within SEARCH_DECADES below the minimum: the sweep's progress
       there is ~1 % of the total) and usually lies a factor 1.3-7 below the minimum,
       so the suggestion is the course's "a third to a tenth of the fastest descent"
       or a little above it.
    """
    lr = table["lr"].to_numpy(float)
    loss = table["loss"].to_numpy(float)
    finite = np.isfinite(loss)
    lr, loss = lr[finite], loss[finite]
    if len(lr) < 5:
        raise ValueError("fewer than 5 rates gave a finite loss before the sweep stopped; "
                         "lower `start`")
    log_lr = np.log10(lr)
    per_decade = (len(lr) - 1) / max(log_lr[-1] - log_lr[0], 1e-12)
    half = max(1, round(WINDOW_DECADES * per_decade / 2))
    smooth = pd.Series(loss).rolling(2 * half + 1, center=True, min_periods=1).median().to_numpy()
    lowest = int(np.argmin(smooth))
    steepest = _steepest(log_lr, smooth, lowest, half)
    suggested = lr[lowest] / safety
    out = pd.DataFrame({"lr": lr, "loss": loss, "smoothed_loss": smooth})
    return LRRangeResult(out, float(suggested), float(lr[steepest]), diverged, float(lr[lowest]))


def _steepest(log_lr: np.ndarray, smooth: np.ndarray, lowest: int, half: int) -> int:
    """Index of the fastest fall per decade, within SEARCH_DECADES below the minimum:
    the loss at a rate holds the progress of every smaller rate, and in a geometric
    sweep the rates below 1/100 of the minimum's add up to ~1 % of it."""
    first = int(np.searchsorted(log_lr, log_lr[lowest] - SEARCH_DECADES))
    centres = np.arange(max(first, half), min(lowest, len(smooth) - 1 - half) + 1)
    if len(centres) == 0:
        return lowest  # no descent before the minimum: the sweep started too high
    slopes = (smooth[centres + half] - smooth[centres - half]) / \
        (log_lr[centres + half] - log_lr[centres - half])
    return int(centres[np.argmin(slopes)])


def _sweep(subject: _Subject, rates: np.ndarray) -> tuple[pd.DataFrame, float | None]:
    """Loss per rate, and the rate at which the loss blew up (None: it never did)."""
    model, optimizer = subject.model, subject.optimizer
    rows, average, best = [], 0.0, math.inf
    model.train()
    for i, lr in enumerate(rates):
        for group in optimizer.param_groups:
            group["lr"] = float(lr)
        X, y = subject.next_batch(i)
        optimizer.zero_grad(set_to_none=True)
        loss = subject.loss_fn(model(X), y)
        loss.backward()
        optimizer.step()
        value = float(loss.detach())
        if not math.isfinite(value):
            return _table(rows), float(lr)
        rows.append((float(lr), value))
        average = SMOOTHING * value + (1 - SMOOTHING) * average
        smoothed = average / (1 - (1 - SMOOTHING) ** (i + 1))  # bias-corrected
        best = min(best, smoothed)
        if smoothed > DIVERGENCE * best:
            return _table(rows), float(lr)
    return _table(rows), None


def _table(rows) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["lr", "loss"])


def _subject(given, seed: int) -> _Subject:
    """Model, optimizer, loss and a batch source from any of the accepted forms."""
    if isinstance(given, str):
        given = baseline(given)  # a task's name; fl.lr_range_test also takes a fault's
    if isinstance(given, Recipe):
        given = build(given, seed)
    if isinstance(given, Parts):
        return _Subject(given.model, given.optimizer, given.loss_fn, _cycle(given.train_loader))
    if isinstance(given, tuple) and len(given) == 4:
        model, optimizer, loss_fn, batches = given
        source = batches if callable(batches) else _cycle(batches)
        subject = _Subject(model, optimizer, loss_fn, source)
    elif all(hasattr(given, a) for a in ("model", "optimizer", "loss_fn", "next_batch")):
        subject = _Subject(given.model, given.optimizer, given.loss_fn, given.next_batch)
    else:
        raise TypeError("lr_range_test takes a Recipe or task name, fl.build's Parts, a tuple "
                        "(model, optimizer, loss_fn, batches) or an object with model, optimizer, "
                        f"loss_fn and next_batch; got {type(given).__name__}")
    if not isinstance(subject.model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(subject.model).__name__}")
    if not isinstance(subject.optimizer, torch.optim.Optimizer):
        raise TypeError(f"optimizer must be a torch.optim.Optimizer, "
                        f"got {type(subject.optimizer).__name__}")
    return subject


def _cycle(batches: Iterable) -> Callable[[int], tuple]:
    """`step -> (x, y)` over a re-iterable, starting it again whenever it runs out."""
    state = {"it": iter(batches)}

    def next_batch(step: int) -> tuple:
        try:
            return next(state["it"])
        except StopIteration:
            state["it"] = iter(batches)
            try:
                return next(state["it"])
            except StopIteration:
                raise ValueError(f"the batches ran out after {step} steps; pass a list, a "
                                 "DataLoader or a function step -> (x, y)") from None
    return next_batch


def _save(subject: _Subject):
    model = subject.model
    return (copy.deepcopy(model.state_dict()), copy.deepcopy(subject.optimizer.state_dict()),
            [m.training for m in model.modules()],
            [None if p.grad is None else p.grad.detach().clone() for p in model.parameters()])


def _restore(subject: _Subject, saved) -> None:
    weights, optimizer_state, modes, grads = saved
    subject.model.load_state_dict(weights)
    subject.optimizer.load_state_dict(optimizer_state)
    for module, training in zip(subject.model.modules(), modes, strict=True):
        module.training = training
    for p, grad in zip(subject.model.parameters(), grads, strict=True):
        p.grad = grad
