"""Ways `Monitor.record` can be called that it cannot record as physics, each named once.

A row with no optimizer step since the previous `record` is either a *skip* or a
*misuse*, told apart by the gradients at `record` time:

* non-finite gradients and no step: the step was skipped on purpose (GradScaler does
  this whenever a float16 gradient overflowed; normal in AMP warm-up).  No warning.
* finite gradients and no step: `record` was called before any step, twice for one step
  (the same loss again), or per micro-batch of gradient accumulation.  One warning each.

Either way the row has `step_skipped = 1` and no update (NaN), so it is never read as a
tiny update or as a non-finite fault.
"""

from __future__ import annotations

import os
import sys
import warnings
import weakref
from typing import Any

import torch

_INTERNAL = (os.path.dirname(__file__), os.path.dirname(torch.__file__))


class MonitorWarning(UserWarning):
    """A monitor instrument stopped, or the monitor was used in a way it cannot record."""


def warn(message: str) -> None:
    """Warn at the user's line: the first frame outside failurelab and torch."""
    level, frame = 2, sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_INTERNAL):
        frame, level = frame.f_back, level + 1
    warnings.warn(f"failurelab.Monitor: {message}", MonitorWarning, stacklevel=level)


_MESSAGES = {
    "before": "record() was called before any optimizer.step(), with finite gradients: "
              "call it after optimizer.step(); this row is marked step_skipped=1 and has "
              "no update (a loop that calls record() before step() every iteration pairs "
              "each loss with the previous step's update on every later row)",
    "twice": "record() was called twice for one optimizer step (the same loss again): the "
             "second row is marked step_skipped=1 and has no update; call record() once "
             "per step",
    "no_step": "record() was called with no optimizer.step() since the last record() and "
               "finite gradients (gradient accumulation recorded per micro-batch?): call "
               "record() once per optimizer step, after optimizer.step(); such rows are "
               "marked step_skipped=1 and have no update",
    "closed": "record() after close() is ignored: the hooks are removed, so nothing new "
              "can be measured (record before closing, or open a new Monitor)",
    # about one extra column each: named once per key
    "measured": "record({key}=...) names a column the monitor measures itself; your value "
                "is ignored and the measured one kept (pass it under another name)",
    "not_a_number": "record({key}=...) got a {kind}, not a number: extra columns hold "
                    "numbers (a float, an int, a one-element tensor); this column is NaN "
                    "where such a value was given",
}


class Misuse:
    """Recognises the misuses above and warns once for each kind."""

    def __init__(self, warn):
        self._warn = warn
        self._told: set[tuple[str, str]] = set()
        self.last: Any = None  # the previous loss (a weak reference for tensors)

    def tell(self, kind: str, key: str = "", what: str = "") -> None:
        """Warn once for each kind of misuse (and each extra column's `key`)."""
        if (kind, key) not in self._told:
            self._told.add((kind, key))
            self._warn(_MESSAGES[kind].format(key=key, kind=what))

    def after_close(self) -> None:
        self.tell("closed")

    def extras(self, extra: dict, measured: frozenset) -> dict:
        """The extra columns `record` can keep: numbers (a one-element tensor on an
        accelerator stays a tensor, read with its chunk), keyed by names the monitor
        does not measure.  Anything else is named once per key, never raised: a column
        of the user's own must not stop their training."""
        kept = {}
        for key, value in extra.items():
            if key in measured:
                self.tell("measured", key)
                continue
            number = extra_number(value)
            if number is None:
                self.tell("not_a_number", key, type(value).__name__)
                number = float("nan")
            kept[key] = number
        return kept

    def no_step(self, loss: Any, count: int, params: list[torch.Tensor]) -> None:
        """A record with no optimizer step since the previous one."""
        if not gradients_finite(params):
            return  # a skipped step: GradScaler found inf/NaN and did not step
        if count == 0:
            self.tell("before")
        elif self._same(loss):
            self.tell("twice")
        else:
            self.tell("no_step")

    def seen(self, loss: Any) -> None:
        self.last = weakref.ref(loss) if isinstance(loss, torch.Tensor) else loss

    def _same(self, loss: Any) -> bool:
        if isinstance(loss, torch.Tensor):
            return isinstance(self.last, weakref.ref) and self.last() is loss
        return not isinstance(self.last, weakref.ref) and self.last == loss


def extra_number(value: Any) -> float | torch.Tensor | None:
    """An extra column's value as a float (a 0-d tensor where reading it now would wait
    for an accelerator); None (NaN) passes; None when it is not a number."""
    if value is None:
        return float("nan")
    if type(value) in (int, float):  # the common case, first
        return value
    if isinstance(value, torch.Tensor):
        if value.numel() != 1 or value.is_complex():
            return None
        return value.detach().reshape(()) if read_later(value) else value.item()
    if isinstance(value, (str, bytes, complex)):
        return None
    try:
        return float(value)  # bool, numpy scalars and 0-d arrays, Decimal, Fraction
    except Exception:  # noqa: BLE001 - whatever a user's object raises, it is no number
        return None


def read_later(loss: torch.Tensor) -> bool:
    """Is reading this loss now a device synchronisation (not a CPU tensor)?  `is_cpu`,
    not `device.type`: it builds no device object, a few hundred ns of every record."""
    return not loss.is_cpu


def gradients_finite(params: list[torch.Tensor]) -> bool:
    """True when every gradient present is finite (the rare path: only without a step)."""
    with torch.no_grad():
        for p in params:
            g = p.grad
            if g is not None:
                values = g.coalesce().values() if g.is_sparse else g
                if values.is_floating_point() and not bool(torch.isfinite(values).all()):
                    return False
    return True


def scalar_loss(loss: Any) -> float | torch.Tensor:
    """The loss as a float, or a 0-d tensor; a clear error for anything else.

    A loss on an accelerator stays a detached 0-d tensor, read with the rest of its
    chunk (`.item()` would wait for the device at every step)."""
    if isinstance(loss, torch.Tensor):
        if loss.numel() != 1:
            raise ValueError(f"record(loss) needs a scalar loss, got shape {tuple(loss.shape)}")
        return loss.detach().reshape(()) if read_later(loss) else loss.item()
    try:
        return float(loss)
    except (TypeError, ValueError):
        raise TypeError(f"record(loss) needs a tensor or a number, got {type(loss).__name__}") \
            from None
