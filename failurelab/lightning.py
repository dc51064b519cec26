"""`fl.Monitor` inside a PyTorch Lightning `Trainer`: one callback, the same history.

    from failurelab.lightning import MonitorCallback
    callback = MonitorCallback()
    Trainer(callbacks=[callback], ...).fit(model, data)
    fl.diagnose(callback.history)

Needs `pip install "failurelab[lightning]"`; `import failurelab` alone never imports
Lightning.  Three things make the callback's history equal to a plain loop's:

- Lightning runs forward and backward inside a closure that it hands to
  `optimizer.step(closure)`, and torch calls step pre-hooks *before* the closure, so a
  monitor would see last step's gradients.  The callback adds its own pre-hook, ahead of
  the Monitor's, that evaluates the closure first and hands the optimizer its result.
- With `accumulate_grad_batches=N` the callback records once per optimizer step, with
  the mean loss of its N micro-batches (`Trainer.global_step` counts optimizer steps).
- A step's row is written just before the next batch starts, so a validation run
  after the step (`self.log("val_loss", ...)`) lands on that step's row as `val_loss`.

Input statistics are seen when `training_step` calls the module itself (`self(x)`).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import torch

from .telemetry.monitor import Monitor

try:
    from lightning.pytorch import Callback
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError('failurelab.lightning needs Lightning: pip install "failurelab[lightning]"') \
        from error

VAL_METRIC = "val_loss"  # the logged metric passed on as the history's val_loss column


class MonitorCallback(Callback):
    """Attach `fl.Monitor` to the LightningModule and its first optimizer while it trains.

    `preset` is the Monitor's ("full" or "economy"); `val_metric` names the logged
    validation metric to record as `val_loss` (None: record none).
    """

    def __init__(self, preset: str = "full", val_metric: str | None = VAL_METRIC):
        self.preset = preset
        self.val_metric = val_metric
        self.monitor: Monitor | None = None
        self._handle = None
        self._steps_seen = 0  # trainer.global_step at the last recorded optimizer step
        self._loss_sum = 0.0  # normalised micro-batch losses since that step
        self._pending: dict[str, Any] | None = None  # a stepped row waiting for validation

    # --- Lightning hooks ---------------------------------------------------------------
    def on_train_start(self, trainer, pl_module) -> None:
        optimizers = trainer.optimizers
        if not optimizers:
            warnings.warn("MonitorCallback: the trainer has no optimizer; nothing is recorded",
                          stacklevel=2)
            return
        if len(optimizers) > 1:
            warnings.warn(f"MonitorCallback: {len(optimizers)} optimizers; only the first is "
                          "monitored", stacklevel=2)
        optimizer = optimizers[0]
        if isinstance(optimizer, torch.optim.LBFGS):
            warnings.warn("MonitorCallback: LBFGS re-evaluates its closure; not monitored",
                          stacklevel=2)
            return
        self._handle = optimizer.register_step_pre_hook(_run_closure_first)  # before Monitor's
        # the trainer's GradScaler under precision="16-mixed"; None otherwise
        scaler = getattr(getattr(trainer, "precision_plugin", None), "scaler", None)
        scaler = scaler if isinstance(scaler, torch.amp.GradScaler) else None
        self.monitor = Monitor(pl_module, optimizer, scaler=scaler, preset=self.preset)
        self._steps_seen = trainer.global_step

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self._write_pending()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self.monitor is None:
            return
        self._loss_sum += _loss_of(outputs)  # Lightning divides it by accumulate_grad_batches
        if trainer.global_step > self._steps_seen:  # an optimizer step ran in this batch
            self._steps_seen = trainer.global_step
            self._pending = {"loss": self._loss_sum}
            self._loss_sum = 0.0

    def on_validation_end(self, trainer, pl_module) -> None:
        if trainer.sanity_checking or self._pending is None or self.val_metric is None:
            return
        value = trainer.callback_metrics.get(self.val_metric)
        if value is not None:
            self._pending[VAL_METRIC] = float(value)

    def on_train_end(self, trainer, pl_module) -> None:
        self._write_pending()

    def teardown(self, trainer, pl_module, stage: str) -> None:
        self._write_pending()
        if self._handle is not None:
            self._handle.remove()
            self._handle = None
        if self.monitor is not None:
            self.monitor.close()

    # --- results -------------------------------------------------------------------------
    @property
    def history(self):
        """The Monitor's history: one row per optimizer step (empty before training)."""
        if self.monitor is None:
            raise RuntimeError("MonitorCallback has recorded nothing: training has not started")
        self._write_pending()
        return self.monitor.history

    def _write_pending(self) -> None:
        if self._pending is not None and self.monitor is not None:
            row, self._pending = self._pending, None
            self.monitor.record(row.pop("loss"), **row)


def _run_closure_first(optimizer, args, kwargs):
    """A step pre-hook: evaluate `step(closure)`'s closure now, so that the hooks after
    this one see this step's gradients; the optimizer then gets the result it returned."""
    closure = kwargs.get("closure", args[1] if len(args) > 1 else None)
    if closure is None:
        return None
    with torch.enable_grad():
        result = closure()
    kwargs = {**kwargs, "closure": lambda: result}
    return args[:1], kwargs


def _loss_of(outputs) -> float:
    """The loss a training_step returned: a tensor, or a dict with "loss"; NaN if neither."""
    if isinstance(outputs, dict):
        outputs = outputs.get("loss")
    if isinstance(outputs, torch.Tensor):
        return float(outputs.detach())
    return float(outputs) if isinstance(outputs, (int, float)) else math.nan
