"""What every real-bug case shares: the fixed/buggy switch, seeded stand-in data, and
the passive harness (the user's own step under `fl.Monitor`, then `fl.diagnose`)."""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Callable, Iterable

import torch

import failurelab as fl

VAL_EVERY = 10  # steps between validation passes in the passive harness


def fixed_from_env() -> bool:
    """True when FAILURELAB_FIX=1: run the case with its one-line fix applied."""
    return os.environ.get("FAILURELAB_FIX", "0") not in ("", "0", "false", "False")


def generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def batched(X: torch.Tensor, y: torch.Tensor, size: int) -> list[tuple]:
    """(X, y) split into consecutive batches, kept in a list so it can be re-iterated."""
    return [(X[i:i + size], y[i:i + size]) for i in range(0, len(X), size)]


def cycle(batches: Iterable, steps: int):
    """`steps` batches, passing over `batches` as many times as needed."""
    return itertools.islice(itertools.cycle(list(batches)), steps)


def _first_tensor(out):
    return out[0] if isinstance(out, (tuple, list)) else out


def validation_loss(model, val_batches, step_loss: Callable) -> float:
    """Mean of `step_loss(model, batch)` over the validation batches, in eval mode,
    without gradients; the model's mode is put back."""
    was = model.training
    model.eval()
    with torch.no_grad():
        losses = [float(step_loss(model, b)) for b in val_batches]
    model.train(was)
    return sum(losses) / len(losses) if losses else math.nan


def monitored_run(parts: dict, val_loss: Callable | None = None):
    """The passive reading: the user's step, `parts["steps"]` times, under a Monitor.

    `val_loss(model, batch) -> loss`, when given and the case has validation batches,
    adds a `val_loss` column every VAL_EVERY steps.  Returns the Monitor's history; a
    step that raises ends the run there (the history so far is what the user saw)."""
    torch.manual_seed(parts.get("seed", 0))
    model = parts["model"]()
    made = parts["optimizer"](model)
    optimizer, scheduler = made if isinstance(made, tuple) else (made, None)
    val_batches = parts.get("val_batches")
    with fl.Monitor(model, optimizer) as mon:
        for i, batch in enumerate(cycle(parts["batches"], parts["steps"])):
            try:
                loss = parts["step"](model, optimizer, batch)
            except Exception:  # noqa: BLE001 - a crashing bug ends the run, as it would
                break
            if scheduler is not None:
                scheduler.step()
            extra = {}
            if val_loss is not None and val_batches and (i % VAL_EVERY == 0
                                                         or i == parts["steps"] - 1):
                extra["val_loss"] = validation_loss(model, val_batches, val_loss)
            mon.record(loss, **extra)
    return mon.history


# --- Measuring harm: a plain run (no Monitor) and the yardsticks a case judges by ------

HARM_TAIL = 10  # final training loss = mean of the last HARM_TAIL steps (one batch is noisy)


def plain_run(parts: dict):
    """The user's step, `parts["steps"]` times, without any instrument.

    Returns (model, losses); a step that raises or a non-finite loss ends the run, and
    the losses then end in NaN so that a crashed or diverged run never looks good."""
    torch.manual_seed(parts.get("seed", 0))
    model = parts["model"]()
    made = parts["optimizer"](model)
    optimizer, scheduler = made if isinstance(made, tuple) else (made, None)
    losses = []
    for batch in cycle(parts["batches"], parts["steps"]):
        try:
            loss = float(parts["step"](model, optimizer, batch))
        except Exception:  # noqa: BLE001 - a crashing bug ends the run, as it would
            losses.append(math.nan)
            break
        losses.append(loss)
        if not math.isfinite(loss):
            break
        if scheduler is not None:
            scheduler.step()
    return model, losses


def final_loss(losses: list[float]) -> float:
    tail = losses[-HARM_TAIL:]
    return sum(tail) / len(tail) if tail else math.nan


def evaluating(fn):
    """Decorator: run a yardstick in eval mode without gradients, mode put back."""
    def wrapped(model, *args, **kwargs):
        was = model.training
        model.eval()
        try:
            with torch.no_grad():
                return fn(model, *args, **kwargs)
        finally:
            model.train(was)
    return wrapped


@evaluating
def accuracy(model, batches, predict: Callable = lambda out: out.argmax(1)) -> float:
    """Fraction of validation samples whose `predict(model(x))` equals the label."""
    right = total = 0
    for x, y in batches:
        out = _first_tensor(model(x))
        if not torch.isfinite(out).all():
            return math.nan
        pred = predict(out)
        right += int((pred.reshape(y.shape) == y).sum())
        total += y.numel()
    return right / total if total else math.nan


@evaluating
def mean_loss(model, batches, loss_fn: Callable) -> float:
    """Mean of `loss_fn(model(x), y)` over the batches (a yardstick shared by buggy and
    fixed runs: it is the CORRECT loss, not necessarily the one the user trained on)."""
    values = [float(loss_fn(_first_tensor(model(x)), y)) for x, y in batches]
    return sum(values) / len(values) if values else math.nan


# --- Seeded stand-in data ------------------------------------------------------------------

def blobs(seed: int, n: int, d: int, classes: int, noise: float = 1.0):
    """Labelled clusters: class k is centre k plus Gaussian noise (a tabular stand-in)."""
    g = generator(seed)
    centres = torch.randn(classes, d, generator=g)
    y = torch.randint(classes, (n,), generator=g)
    return centres[y] + noise * torch.randn(n, d, generator=g), y


def pixels(seed: int, n: int, side: int, classes: int, noise: float = 0.35):
    """MNIST-like images in [0, 1]: a sparse stroke pattern per class plus noise,
    shape (n, 1, side, side)."""
    g = generator(seed)
    strokes = (torch.rand(classes, side * side, generator=g) < 0.2).float()
    y = torch.randint(classes, (n,), generator=g)
    x = strokes[y] * 0.8 + noise * torch.randn(n, side * side, generator=g)
    return x.clamp(0, 1).reshape(n, 1, side, side), y


def split(X, y, n_val: int):
    """(train X, train y, val X, val y): the last n_val samples are held out."""
    return X[:-n_val], y[:-n_val], X[-n_val:], y[-n_val:]
