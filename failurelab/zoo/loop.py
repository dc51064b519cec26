"""`run(case)`: the plain PyTorch loop a user writes, observed by `fl.Monitor` and
nothing else.  Read it top to bottom; the loop faults enter at the zero_grad lines.

Extras passed to `record` (the way a user adds columns):
* habit "val": `val_loss` (the training loss function, model.eval(), under no_grad)
  and, for classifiers, `val_acc`, every VAL_EVERY steps and at the last step;
* habit "extras": `lr` (the rate this step used) and, for classifiers, `batch_acc`.

Habit "amp" is mixed precision as the PyTorch AMP recipe writes it: the forward under
float16 autocast, the loss scaled by a `GradScaler`, unscaled before clipping, and the
step taken (or skipped, on inf/NaN) by the scaler.
Without those habits the history holds only the Monitor's own columns.
"""

from __future__ import annotations

import math
import warnings

import pandas as pd
import torch
from torch import nn

from ..lab import runcache
from ..lab.train import torch_threads
from ..telemetry.monitor import Monitor
from .cases import Case
from .parts import Loop, build, data_seed

VAL_EVERY = 10


def run(case: Case, lr: float | None = None) -> pd.DataFrame:
    """Monitor.history of `case`'s loop, on one torch thread; bitwise reproducible.
    The caller's RNG state and thread count are restored afterwards."""
    stored = runcache.key("zoo", case, lr)
    done = runcache.load(stored)  # a verification session's notebooks share runs
    if done is not None:
        return done
    with torch_threads(1), torch.random.fork_rng(), warnings.catch_warnings():
        # broadcast_mse: torch warns about the broadcast; the user ignored it, so do we
        warnings.filterwarnings("ignore", message="Using a target size")
        # amp: a GradScaler skips the first step (its scale overflows float16), and torch
        # then warns that the scheduler stepped first; AMP users see and ignore it too
        warnings.filterwarnings("ignore", message=r"Detected call of `lr_scheduler\.step\(\)`")
        loop = build(case, lr)
        torch.manual_seed(data_seed(case))  # dropout draws from here
        history = train(loop)
    runcache.store(stored, history)
    return history


def train(loop: Loop) -> pd.DataFrame:
    model, optimizer, zero_grad = loop.model, loop.optimizer, loop.knobs.zero_grad
    habits = loop.case.habits
    scaler = torch.amp.GradScaler("cpu") if "amp" in habits else None
    train_mode = loop.knobs.train_mode
    model.train()
    with Monitor(model, optimizer) as mon:
        for step in range(loop.steps):
            x, y = loop.next_batch(step)
            if train_mode == "each_step" or (train_mode == "each_epoch"
                                             and step % loop.steps_per_epoch == 0):
                model.train()
            if zero_grad == "each_step" or (zero_grad == "each_epoch"
                                            and step % loop.steps_per_epoch == 0):
                optimizer.zero_grad()
            loss, output = _forward_backward(loop, x, y, scaler)
            if zero_grad in ("misplaced", "misplaced_keep"):  # the bug: after backward
                optimizer.zero_grad(set_to_none=zero_grad == "misplaced")
            if loop.knobs.scaled_clip:  # the fault "clip_before_unscale": no unscale_()
                nn.utils.clip_grad_norm_(model.parameters(), loop.knobs.scaled_clip)
            elif loop.clip:
                if scaler is not None:
                    scaler.unscale_(optimizer)  # clip the true gradients, not scaled ones
                nn.utils.clip_grad_norm_(model.parameters(), loop.clip)
            lr = optimizer.param_groups[0]["lr"]
            if scaler is None:
                optimizer.step()
            else:
                scaler.step(optimizer)
                scaler.update()
            if loop.scheduler is not None:
                loop.scheduler.step()
            extras = {}
            if "extras" in habits:
                extras["lr"] = lr
                if loop.target != "value":
                    extras["batch_acc"] = accuracy(output, y[-len(output):], loop)
            if loop.val is not None and (step % VAL_EVERY == 0 or step == loop.steps - 1):
                extras.update(validate(loop))
            mon.record(loss, **extras)
            if not math.isfinite(loss):
                break  # a user's loop stops at a NaN loss: nothing after it means anything
    return mon.history


def _forward_backward(loop: Loop, x: torch.Tensor, y: torch.Tensor, scaler=None):
    """Forward and backward over the micro-batches; the mean loss and the last output."""
    total = 0.0
    # the fault "accumulation_not_divided": each micro-batch mean goes in whole
    parts = 1 if loop.knobs.undivided_micro_batches else loop.micro_batches
    scale = parts * loop.knobs.loss_divisor
    autocast = loop.knobs.fp16 == "autocast" or scaler is not None
    for xb, yb in zip(x.chunk(loop.micro_batches), y.chunk(loop.micro_batches), strict=True):
        with torch.autocast("cpu", dtype=torch.float16, enabled=autocast):
            output = loop.model(xb)  # the fault "autocast": float16 without a GradScaler
        loss = loop.loss_fn(output, yb)
        scaled = loss / scale
        (scaled if scaler is None else scaler.scale(scaled)).backward()
        total += loss.item() / loop.micro_batches
    return total, output.detach()


def validate(loop: Loop) -> dict[str, float]:
    X, y = loop.val
    loop.model.eval()
    with torch.no_grad():
        output = loop.model(X)
        out = {"val_loss": float(loop.loss_fn(output, y))}
        if loop.target != "value":
            out["val_acc"] = accuracy(output, y, loop)
    if loop.knobs.train_mode == "each_step":
        loop.model.train()  # the fault "train_mode_not_restored" leaves it in eval mode
    return out


def accuracy(output: torch.Tensor, y: torch.Tensor, loop: Loop) -> float:
    if loop.target == "classes":
        return float((output.argmax(-1) == y).float().mean())
    threshold = 0.5 if loop.knobs.output == "probs" else 0.0  # probabilities or logits
    return float(((output > threshold).float() == y).float().mean())
