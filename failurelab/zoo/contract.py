"""`parts(case)`: a zoo case as the keyword arguments of `fl.investigate` (see
docs/investigate.md), so the active diagnosis runs on the very loop the passive one
reads.

The parts are the case's own, fault included, each where a user would have written it:

* `model()` builds the family's model with the model faults (init scale, saturating or
  dead first layer, dropout rate, probabilities at the output, depth, the `.detach()`),
  the deliberate `requires_grad` freeze and `model.half()`.  Its weights come from the
  seed the caller set with `torch.manual_seed`, drawn in a fork of the RNG so that the
  training's own random stream (dropout) starts where `zoo.run` starts it: with
  `seed=parts["seed"]` the run is the zoo's run, bitwise.
* `optimizer(model)` builds the case's optimizer (learning rate and weight-decay faults,
  the parameters left out of it) and, with a schedule habit, its scheduler.  The stale
  optimizer faults live here too: it is built on the model the notebook made *before*
  the one that trains (re-created, or deep-copied), as a re-run cell does.
* `step(model, optimizer, batch)` is the body of `zoo/loop.py`'s loop: zero_grad where
  the fault puts it, micro-batches, autocast, the GradScaler, clipping (before or after
  unscale), the step, and the loop's own validation pass every VAL_EVERY steps (where
  `train_mode_not_restored` lives: it puts the model in eval mode and leaves it there).
  Per-run state (the step count, the GradScaler) is kept per optimizer, so every run
  that builds its own optimizer gets its own.
* `loss` is the loss function the step calls, as the user wrote it (a hand-written or
  broadcasting loss included): the reference-step arm changes the loop, nothing else.
* `batches` are the case's `steps` training batches, in the order `zoo.run` draws them.
"""

from __future__ import annotations

import copy
import math
import warnings
import weakref
from dataclasses import dataclass, replace

import torch
from torch import nn

from ..lab.train import torch_threads
from ..telemetry.monitor import Monitor
from .cases import Case
from .families import FAMILIES_BY_NAME
from .loop import VAL_EVERY, _forward_backward, validate
from .parts import ADAMW_DECAY, Loop, _loss_fn, _scheduler, build, data_seed, knobs_of, make_optimizer


def parts(case: Case) -> dict:
    """`fl.investigate`'s keyword arguments for `case` (see the module docstring).
    Every part is a picklable object, so an investigation may send it to a worker."""
    loop = build(case)
    return dict(model=ZooModel(case), optimizer=ZooOptimizer(case), step=ZooStep(case),
                batches=[loop.next_batch(s) for s in range(loop.steps)], loss=ZooLoss(case),
                val_batches=[loop.val] if loop.val is not None else None,
                steps=loop.steps, seed=data_seed(case))


def run_parts(kwargs: dict):
    """The plain loop of the contract under `fl.Monitor`, on one torch thread: seed,
    model, optimizer, then `step` on each batch (the scheduler stepped after it),
    stopping at a non-finite loss as the zoo's loop does.  Returns (Monitor history,
    trained model); the caller's RNG state and thread count are restored."""
    with torch_threads(1), torch.random.fork_rng():
        torch.manual_seed(kwargs.get("seed", 0))
        model = kwargs["model"]()
        made = kwargs["optimizer"](model)
        optimizer, scheduler = made if isinstance(made, tuple) else (made, None)
        batches = list(kwargs["batches"])
        with Monitor(model, optimizer) as mon:
            for i in range(kwargs["steps"]):
                loss = kwargs["step"](model, optimizer, batches[i % len(batches)])
                if scheduler is not None:
                    scheduler.step()
                mon.record(loss)
                if not math.isfinite(float(loss)):
                    break
    return mon.history, model


# The stale optimizer faults: the model that trains keeps, outside its modules, the
# model the notebook's optimizer cell saw (kept in __dict__ so that it is no submodule,
# yet travels with a copy or a pickle of the model).
_SEEN_BY_OPTIMIZER = "_zoo_model_the_optimizer_saw"


@dataclass(frozen=True)
class ZooModel:
    """() -> the case's model, from the seed the caller set."""

    case: Case

    def __call__(self) -> nn.Module:
        family, k = FAMILIES_BY_NAME[self.case.family], knobs_of(self.case)
        with torch.random.fork_rng():
            torch.manual_seed(torch.initial_seed())  # the seed the caller set
            model = family.make_model(k)
            if k.frozen == "requires_grad":
                for p in model.body.parameters():
                    p.requires_grad_(False)
            seen = model
            if k.stale_optimizer == "rebuilt":
                model = family.make_model(k)  # the cell re-run after the optimizer's
            elif k.stale_optimizer == "deepcopy":
                model = copy.deepcopy(model)
        if seen is not model:
            model.__dict__[_SEEN_BY_OPTIMIZER] = seen
        if k.fp16 == "half":
            model.half()  # the fault: no GradScaler, nothing kept in float32
        return model


@dataclass(frozen=True)
class ZooOptimizer:
    """(model) -> the case's optimizer, or (optimizer, scheduler): the optimizer line of
    `zoo/parts.py` (`_optimized`), on the model it is given."""

    case: Case

    def __call__(self, model: nn.Module):
        k, name = knobs_of(self.case), self.case.optimizer
        family = FAMILIES_BY_NAME[self.case.family]
        seen = model.__dict__.get(_SEEN_BY_OPTIMIZER, model)
        params = seen.parameters()
        if k.frozen == "optimizer":
            params = seen.head.parameters()
        elif k.frozen == "first_layer":
            params = list(seen.parameters())[2:]
        lr = family.lrs[name] * k.lr_factor
        decay = k.decay_per_step / lr if k.decay_per_step else (ADAMW_DECAY if name == "adamw" else 0)
        optimizer = make_optimizer(name, params, lr, decay)
        scheduler = _scheduler(optimizer, self.case.habits, family.steps)
        return optimizer if scheduler is None else (optimizer, scheduler)


@dataclass(frozen=True)
class ZooLoss:
    """(output, target) -> loss: the loss function the case's step calls."""

    case: Case

    def __call__(self, output, target):
        fn = _loss_fn(FAMILIES_BY_NAME[self.case.family], knobs_of(self.case))
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Using a target size")
            return fn(output, target)


@dataclass
class _Run:
    loop: Loop  # the case's loop, holding this run's model and optimizer
    scaler: object
    count: int = 0


class ZooStep:
    """(model, optimizer, batch) -> loss: the body of `zoo/loop.py`'s `train`, one step a
    call.  A run's state (its step count, its GradScaler) is kept per optimizer."""

    def __init__(self, case: Case):
        self.case = case
        self._runs = weakref.WeakKeyDictionary()

    def __getstate__(self):
        return {"case": self.case}  # a fresh process starts fresh runs

    def __setstate__(self, state):
        self.__init__(state["case"])

    def _run(self, model, optimizer) -> _Run:
        run = self._runs.get(optimizer)
        if run is None or run.loop.model is not model:
            loop = replace(build(self.case), model=model, optimizer=optimizer)
            scaler = torch.amp.GradScaler("cpu") if "amp" in self.case.habits else None
            run = self._runs[optimizer] = _Run(loop, scaler)
        return run

    def __call__(self, model, optimizer, batch) -> float:
        run = self._run(model, optimizer)
        n, loop, scaler, k = run.count, run.loop, run.scaler, run.loop.knobs
        run.count += 1
        x, y = batch
        if k.train_mode == "each_step" or (k.train_mode == "each_epoch"
                                           and n % loop.steps_per_epoch == 0):
            model.train()
        if k.zero_grad == "each_step" or (k.zero_grad == "each_epoch"
                                          and n % loop.steps_per_epoch == 0):
            optimizer.zero_grad()
        with warnings.catch_warnings():
            # broadcast_mse: torch warns about the broadcast; the user ignored it
            warnings.filterwarnings("ignore", message="Using a target size")
            loss, _ = _forward_backward(loop, x, y, scaler)
        if k.zero_grad in ("misplaced", "misplaced_keep"):  # the bug: after backward
            optimizer.zero_grad(set_to_none=k.zero_grad == "misplaced")
        if k.scaled_clip:  # the fault "clip_before_unscale": no unscale_()
            nn.utils.clip_grad_norm_(model.parameters(), k.scaled_clip)
        elif loop.clip:
            if scaler is not None:
                scaler.unscale_(optimizer)
            nn.utils.clip_grad_norm_(model.parameters(), loop.clip)
        if scaler is None:
            optimizer.step()
        else:
            scaler.step(optimizer)
            scaler.update()
        if loop.val is not None and (n % VAL_EVERY == 0 or n == loop.steps - 1):
            validate(loop)  # the user's own validation pass: its mode handling included
        return loss

