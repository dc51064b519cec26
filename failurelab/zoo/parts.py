"""`build(case)`: the seeded parts of one zoo run, with the case's fault planted where
a user would have written it (data, model, optimizer, loss); `zoo/loop.py` runs them."""

from __future__ import annotations

import copy
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from . import data
from .cases import Case
from .families import FAMILIES_BY_NAME, Family
from .faults import FAULTS
from .knobs import Knobs, with_knobs

CLIP_NORM = 1.0  # the "clip" habit's max gradient norm
ADAMW_DECAY = 0.01  # torch's default decoupled decay: part of a healthy AdamW run


@dataclass
class Loop:
    """Everything one run is made of.  `next_batch(step)` is the (x, y) of optimizer
    step `step` (split into `micro_batches` by an accumulating loop)."""

    case: Case
    knobs: Knobs
    model: nn.Module
    optimizer: torch.optim.Optimizer
    loss_fn: Callable
    next_batch: Callable[[int], tuple]
    steps: int
    val: tuple | None  # (x, y) when the case validates, else None
    lr: float
    target: str  # "classes" | "binary" | "value"
    scheduler: object = None  # a torch LR scheduler, stepped once per optimizer step
    clip: float | None = None
    micro_batches: int = 1
    steps_per_epoch: int = 1


def knobs_of(case: Case) -> Knobs:
    if case.fault is None:
        return Knobs()
    return with_knobs(FAULTS[case.fault].settings(case.severity))


def data_seed(case: Case) -> int:
    """One seed per family and seed, stable when families are added."""
    return zlib.crc32(f"{case.family}/{case.seed}".encode())


def build(case: Case, lr: float | None = None) -> Loop:
    """The parts of `case`; `lr` replaces its learning rate (fault factor included).
    The caller's global RNG state is left untouched."""
    family, k = FAMILIES_BY_NAME[case.family], knobs_of(case)
    g = torch.Generator().manual_seed(data_seed(case))
    split = _prepared(family.make_data(g), k, g)
    lr = family.lrs[case.optimizer] * k.lr_factor if lr is None else lr
    with torch.random.fork_rng():
        torch.manual_seed(data_seed(case))
        model = family.make_model(k)
        model, optimizer = _optimized(model, family, case.optimizer, lr, k)
    if k.fp16 == "half":
        model.half()  # the fault: no GradScaler, nothing kept in float32
    X, y = _typed(split.X, split.y, k)
    val = _typed(split.X_val, split.y_val, k) if "val" in case.habits else None
    return Loop(case, k, model, optimizer, _loss_fn(family, k),
                next_batch=_batches(X, y, family.batch, data_seed(case)),
                steps=family.steps, val=val, lr=lr, target=family.target,
                scheduler=_scheduler(optimizer, case.habits, family.steps),
                clip=CLIP_NORM if "clip" in case.habits else None,
                micro_batches=k.undivided_micro_batches or (2 if "accum" in case.habits else 1),
                steps_per_epoch=len(X) // family.batch)


def _prepared(split: data.Split, k: Knobs, g: torch.Generator) -> data.Split:
    """The data faults: raw units (train and val, or val alone), NaN rows and X shuffled
    (train)."""
    X, X_val = split.X, split.X_val
    if k.raw_decades:
        X, X_val = data.raw_units(X, X_val, k.raw_decades, g)
    if k.val_raw_decades:  # the scaler was applied to the training split only
        _, X_val = data.raw_units(X_val, X_val, k.val_raw_decades, g)
    if k.nan_rows:
        X = data.with_nan_rows(X, k.nan_rows, g)
    if k.shuffled_rows:
        X = data.with_shuffled_rows(X, k.shuffled_rows, g)
    return data.Split(X, split.y, X_val, split.y_val)


def _typed(X: torch.Tensor, y: torch.Tensor, k: Knobs):
    if k.fp16 == "half":
        X = X.half() if X.is_floating_point() else X
        y = y.half() if y.is_floating_point() else y
    if k.target_shape == "flat_targets":
        y = y.squeeze(1)  # (B,): the bug is in the data pipeline
    return X, y


def _optimized(model: nn.Module, family: Family, name: str, lr: float, k: Knobs):
    """The model the loop trains and its optimizer, with the optimizer faults."""
    params = model.parameters()
    if k.frozen == "requires_grad":
        for p in model.body.parameters():
            p.requires_grad_(False)
    elif k.frozen == "optimizer":
        params = model.head.parameters()  # the body is never handed to the optimizer
    elif k.frozen == "first_layer":
        params = list(model.parameters())[2:]  # the first layer's weight and bias left out
    decay = k.decay_per_step / lr if k.decay_per_step else (ADAMW_DECAY if name == "adamw" else 0)
    optimizer = make_optimizer(name, params, lr, decay)
    if k.stale_optimizer == "rebuilt":
        model = family.make_model(k)  # re-created after the optimizer was built
    elif k.stale_optimizer == "deepcopy":
        model = copy.deepcopy(model)
    return model, optimizer


def make_optimizer(name: str, params, lr: float, weight_decay: float = 0.0):
    """The named optimizer.  foreach=True: one fused call per operation instead of one per
    parameter tensor (the CUDA default), several times faster for tiny CPU models."""
    kinds = {"sgd": (torch.optim.SGD, {}), "momentum": (torch.optim.SGD, {"momentum": 0.9}),
             "adam": (torch.optim.Adam, {}), "adamw": (torch.optim.AdamW, {}),
             "rmsprop": (torch.optim.RMSprop, {})}
    if name not in kinds:
        raise ValueError(f"unknown optimizer {name!r}; known: {', '.join(kinds)}")
    kind, options = kinds[name]
    return kind(params, lr=lr, weight_decay=weight_decay, foreach=True, **options)


def _loss_fn(family: Family, k: Knobs) -> Callable:
    if family.target == "classes":
        if k.loss == "unsafe_softmax":
            return lambda logits, y: unsafe_cross_entropy(logits, y, k.temperature)
        return nn.NLLLoss() if k.output == "probs_nll" else nn.CrossEntropyLoss()
    if family.target == "binary":
        return nn.BCEWithLogitsLoss()
    if k.target_shape == "flat_outputs":
        return lambda out, y: nn.functional.mse_loss(out.view(-1), y)  # (B,) vs (B, 1)
    return nn.MSELoss()


def unsafe_cross_entropy(logits: torch.Tensor, y: torch.Tensor, temperature: float):
    """Cross-entropy written by hand, without subtracting the largest logit: exp(z / T)
    overflows to inf beyond z / T = 88, and inf / inf = NaN (or -log(0) = inf)."""
    e = torch.exp(logits / temperature)
    p = e / e.sum(1, keepdim=True)
    return -torch.log(p[torch.arange(len(y)), y]).mean()


def _scheduler(optimizer, habits: tuple, steps: int):
    if "cosine" in habits:
        return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps)
    if "step_lr" in habits:
        return torch.optim.lr_scheduler.StepLR(optimizer, step_size=steps // 3, gamma=0.3)
    return None


def _batches(X: torch.Tensor, y: torch.Tensor, batch: int, seed: int):
    """Shuffled epochs: step s takes rows [s * batch, (s + 1) * batch) of its epoch's
    permutation, drawn from (seed, epoch) alone so any step can be asked for."""
    per_epoch = len(X) // batch
    orders: dict[int, torch.Tensor] = {}

    def next_batch(step: int):
        epoch, i = divmod(step, per_epoch)
        if epoch not in orders:
            orders.clear()
            g = torch.Generator().manual_seed(seed + 7919 * (epoch + 1))
            orders[epoch] = torch.randperm(len(X), generator=g)
        rows = orders[epoch][i * batch:(i + 1) * batch]
        return X[rows], y[rows]

    return next_batch
