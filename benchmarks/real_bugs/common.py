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
