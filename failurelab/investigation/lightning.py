"""A LightningModule as parts: `configure_optimizers` makes the optimizer (and
scheduler), `training_step` is the step (Lightning's automatic optimisation: zero_grad,
training_step, backward, step), the datamodule's loaders (or `batches=`) the data.

A fresh model is made again from the module's saved hyper-parameters
(`type(module)(**module.hparams)`, so another seed gives another initialisation);
a module that cannot be rebuilt that way is copied as it was handed in (every seed
then starts from the same weights, and the spread floor does the work).  Lightning is
only imported by the caller: this module reads the object it is given.
"""

from __future__ import annotations

import copy

import torch

from .errors import PartsError


def lightning_parts(module, datamodule=None, batches=None, val_batches=None) -> dict:
    if batches is None:
        if datamodule is None:
            raise PartsError("a LightningModule needs its data: pass datamodule= or batches=")
        if hasattr(datamodule, "setup"):
            datamodule.setup("fit")
        batches = datamodule.train_dataloader
        if val_batches is None and _has(datamodule, "val_dataloader"):
            val_batches = datamodule.val_dataloader
    return dict(model=_maker(module), optimizer=_optimizers, batches=batches,
                step=_step, val_batches=val_batches)


def _has(obj, name: str) -> bool:
    try:
        return getattr(obj, name)() is not None
    except Exception:  # noqa: BLE001 - Lightning's default raises when none is defined
        return False


def _maker(module):
    kind, hparams = type(module), dict(getattr(module, "hparams", {}) or {})
    try:
        kind(**hparams)
        rebuild = True
    except Exception:  # noqa: BLE001 - not rebuildable from its hyper-parameters
        rebuild = False
    template = copy.deepcopy(module)

    def make():
        return kind(**hparams) if rebuild else copy.deepcopy(template)
    return make


def _optimizers(model):
    """configure_optimizers' many return forms -> (optimizer, scheduler or None)."""
    out = model.configure_optimizers()
    if isinstance(out, torch.optim.Optimizer):
        return out, None
    if isinstance(out, dict):
        scheduler = out.get("lr_scheduler")
        if isinstance(scheduler, dict):
            scheduler = scheduler.get("scheduler")
        return out["optimizer"], scheduler
    if isinstance(out, (list, tuple)) and out:
        if len(out) == 2 and isinstance(out[0], (list, tuple)):
            schedulers = out[1]
            scheduler = schedulers[0] if schedulers else None
            scheduler = scheduler.get("scheduler") if isinstance(scheduler, dict) else scheduler
            return out[0][0], scheduler
        first = out[0]
        return (first["optimizer"], None) if isinstance(first, dict) else (first, None)
    raise PartsError(f"configure_optimizers returned {type(out).__name__}: expected an "
                     f"optimizer, a dict, or lists of optimizers and schedulers")


def _step(model, optimizer, batch):
    """Lightning's automatic optimisation, one step."""
    optimizer.zero_grad()
    out = model.training_step(batch, 0)
    loss = out["loss"] if isinstance(out, dict) else out
    loss.backward()
    optimizer.step()
    return loss
